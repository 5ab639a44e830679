"""The system's PCRE2 (``libpcre2-8``, the 8-bit library grep depends on), loaded with ctypes: a
pattern compiled with its JIT, the per-thread match state, and a Python ``finditer`` of whole
matches (for the plan's checks and the tests; the counting kernel calls ``pcre2_jit_match_8``
itself, :mod:`.kernel`). :func:`library` is None, with the reason in :func:`missing`, where there
is no such library or it was built without JIT.
Example: ``[m for m in Code(r"\\p{L}+").finditer("ab cd")] == [(0, 2), (3, 5)]``."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

# pcre2.h (10.x): compile options, match options, errors, config and info codes
UTF, UCP, NEVER_BACKSLASH_C = 0x00080000, 0x00020000, 0x00100000
ALT_CIRCUMFLEX = 0x00200000  # (?m)^ after a final newline too, as regex reads it
NOTEMPTY_ATSTART = 0x00000008
ERROR_NOMATCH = -1
JIT_COMPLETE = 0x1
NEWLINE_LF = 2
_CONFIG_JIT, _CONFIG_UNICODE_VERSION, _CONFIG_VERSION = 1, 10, 11
_INFO_CAPTURECOUNT = 4
JIT_STACK = (32 << 10, 8 << 20)  # a thread's JIT stack: its first and largest size
_NAMES = ("libpcre2-8.so.0", "libpcre2-8.so", "libpcre2-8.0.dylib", "libpcre2-8.dylib")


def _bind(lib: ctypes.CDLL) -> None:
    P, S, U32, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int
    sigs = {
        "pcre2_config_8": (I, [U32, P]),
        "pcre2_compile_context_create_8": (P, [P]),
        "pcre2_compile_context_free_8": (None, [P]),
        "pcre2_set_newline_8": (I, [P, U32]),
        "pcre2_compile_8": (P, [ctypes.c_char_p, S, U32, ctypes.POINTER(I), ctypes.POINTER(S), P]),
        "pcre2_code_free_8": (None, [P]),
        "pcre2_jit_compile_8": (I, [P, U32]),
        "pcre2_pattern_info_8": (I, [P, U32, P]),
        "pcre2_get_error_message_8": (I, [I, ctypes.c_char_p, S]),
        "pcre2_match_data_create_from_pattern_8": (P, [P, P]),
        "pcre2_match_data_free_8": (None, [P]),
        "pcre2_get_ovector_pointer_8": (P, [P]),
        "pcre2_match_context_create_8": (P, [P]),
        "pcre2_match_context_free_8": (None, [P]),
        "pcre2_jit_stack_create_8": (P, [S, S, P]),
        "pcre2_jit_stack_free_8": (None, [P]),
        "pcre2_jit_stack_assign_8": (None, [P, P, P]),
        "pcre2_jit_match_8": (I, [P, ctypes.c_char_p, S, S, U32, P, P]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


@functools.lru_cache(maxsize=1)
def _load() -> tuple[ctypes.CDLL | None, str, str]:
    """(the library, its path, why not: "" when it is there with JIT)."""
    names = list(_NAMES)
    found = ctypes.util.find_library("pcre2-8")
    if found:
        names.insert(0, found)
    for name in names:
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        try:
            _bind(lib)
        except AttributeError as e:
            return None, name, f"{name} lacks {e}"
        jit = ctypes.c_uint32()
        lib.pcre2_config_8(_CONFIG_JIT, ctypes.byref(jit))
        if not jit.value:
            return None, name, f"{name} was built without its JIT"
        return lib, name, ""
    return None, "", "no libpcre2-8 on this system (Debian: apt-get install libpcre2-8-0)"


def library() -> ctypes.CDLL | None:
    """The library with JIT, or None (see :func:`missing`)."""
    return _load()[0]


def missing() -> str:
    """Why PCRE2's JIT cannot be used here ("" when it can)."""
    return _load()[2]


def path() -> str:
    """The library's file name as it was loaded."""
    return _load()[1]


def _config_text(what: int) -> str:
    buf = ctypes.create_string_buffer(64)
    library().pcre2_config_8(what, buf)
    return buf.value.decode()


def version() -> str:
    """PCRE2's version, e.g. ``"10.42 2022-12-11"``."""
    return _config_text(_CONFIG_VERSION)


def unicode_version() -> str:
    """The Unicode version of PCRE2's tables, e.g. ``"14.0.0"``."""
    return _config_text(_CONFIG_UNICODE_VERSION)


def _message(code: int) -> str:
    buf = ctypes.create_string_buffer(256)
    library().pcre2_get_error_message_8(code, buf, 256)
    return buf.value.decode()


class CompileError(Exception):
    """PCRE2 refused the pattern (its message and offset) or its JIT failed."""


class Code:
    """A pattern compiled by PCRE2 (UTF, UCP, ``\\n`` the newline, ``(?m)^`` after a final newline
    too) and by its JIT; ``address`` is the
    compiled code's, ``groups`` its capture groups. Freed with the object."""

    def __init__(self, text: str, options: int = 0) -> None:
        lib = library()
        self._lib = lib
        ctx = lib.pcre2_compile_context_create_8(None)
        lib.pcre2_set_newline_8(ctx, NEWLINE_LF)
        err, off = ctypes.c_int(), ctypes.c_size_t()
        b = text.encode("utf-8")
        flags = UTF | UCP | NEVER_BACKSLASH_C | ALT_CIRCUMFLEX | options
        self.address = lib.pcre2_compile_8(b, len(b), flags, ctypes.byref(err), ctypes.byref(off), ctx)
        lib.pcre2_compile_context_free_8(ctx)
        if not self.address:
            raise CompileError(f"{_message(err.value)} at offset {off.value}")
        rc = lib.pcre2_jit_compile_8(self.address, JIT_COMPLETE)
        if rc != 0:
            raise CompileError(f"its JIT failed ({_message(rc)})")
        n = ctypes.c_uint32()
        lib.pcre2_pattern_info_8(self.address, _INFO_CAPTURECOUNT, ctypes.byref(n))
        self.groups = n.value

    def __del__(self) -> None:
        if getattr(self, "address", None):
            self._lib.pcre2_code_free_8(self.address)
            self.address = None

    def finditer(self, text: str | bytes, state: "MatchState | None" = None):
        """(start, end) byte offsets of each whole match in ``text``'s UTF-8, as ``regex``'s
        ``finditer`` finds them (after an empty match, the next one may not be empty there)."""
        b = text.encode("utf-8") if isinstance(text, str) else text
        st = state or MatchState(self)
        pos, opts = 0, 0
        while pos <= len(b):
            rc = self._lib.pcre2_jit_match_8(self.address, b, len(b), pos, opts, st.match_data, st.context)
            if rc == ERROR_NOMATCH:
                return
            if rc < 0:
                raise CompileError(f"matching failed ({_message(rc)})")
            a, z = st.ovector[0], st.ovector[1]
            yield a, z
            pos, opts = z, (NOTEMPTY_ATSTART if z == a else 0)


class MatchState:
    """One thread's match data (its ``ovector`` address) and match context with a JIT stack of
    its own; freed with the object."""

    def __init__(self, code: Code) -> None:
        lib = self._lib = library()
        self.match_data = lib.pcre2_match_data_create_from_pattern_8(code.address, None)
        self.context = lib.pcre2_match_context_create_8(None)
        self.stack = lib.pcre2_jit_stack_create_8(JIT_STACK[0], JIT_STACK[1], None)
        if not (self.match_data and self.context and self.stack):
            raise MemoryError("toktok: PCRE2 could not allocate its match state")
        lib.pcre2_jit_stack_assign_8(self.context, None, self.stack)
        self.ovector_address = lib.pcre2_get_ovector_pointer_8(self.match_data)
        self.ovector = ctypes.cast(self.ovector_address, ctypes.POINTER(ctypes.c_size_t))

    def __del__(self) -> None:
        lib = self._lib
        for free, attr in ((lib.pcre2_match_data_free_8, "match_data"), (lib.pcre2_match_context_free_8, "context"),
                           (lib.pcre2_jit_stack_free_8, "stack")):
            if getattr(self, attr, None):
                free(getattr(self, attr))
                setattr(self, attr, None)
