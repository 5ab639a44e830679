from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "data_fixtures"
sys.path.insert(0, str(Path(__file__).parent))

# Fuzz budget: TOKTOK_FUZZ multiplies every hypothesis test's examples (slow mode uses 10).
FUZZ = int(os.environ.get("TOKTOK_FUZZ", "1"))
settings.register_profile("toktok", deadline=None, max_examples=100 * FUZZ, derandomize=os.environ.get("CI") == "true")
settings.load_profile("toktok")


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES
