"""The count stage: sources in, a phase's word table out.

``read`` resolves and streams sources (files, folders, globs), ``remote`` the URL sources
(``s3://``, ``gs://``, ``az://``, ``hf://``, ``https://``), ``memory`` data held in Python;
``sample`` keeps a seeded, mergeable reservoir when a phase has a budget; ``cuts`` says where
each pattern lets a long document be cut; ``scan`` splits text with the run's pattern
(GPT-4's by default) and counts the words; ``common`` is the counting core (document ids,
the capacity split, statistics, the parity sample, checkpoints) that ``local`` and ``ray`` both
follow when they run read → sample → count for one phase on this machine or on a Ray cluster,
returning the same ``PhaseCount``.
Example: ``from toktok.count.local import count_phase``.
"""
