"""The count stage: sources in, a phase's word table out.

``read`` resolves and streams sources (files, folders, globs), ``remote`` the URL sources
(``s3://``, ``gs://``, ``az://``, ``hf://``, ``https://``), ``memory`` data held in Python;
``sample`` keeps a seeded, mergeable reservoir when a phase has a budget; ``pretokenize`` splits
text with the GPT-4 pattern and counts the words; ``local`` and ``ray`` run read → sample → count
for one phase on this machine or on a Ray cluster and return the same ``PhaseCount``.
Example: ``from toktok.count.local import count_phase``.
"""
