"""Save and restore a model's States with orbax-checkpoint (the ``checkpoint`` extra).

``save(path, target)`` writes every State of a Module, a ``StateDict`` or a dict
of States, plus the global random stream ``state_random.DEFAULT``, to a new
directory; ``restore(path, target)`` reads it back into a model built the same
way. Typed PRNG keys, dtypes and (on restore) each state's sharding round-trip,
so training resumed from a checkpoint continues bit for bit.

Needs ``pip install state-nn[checkpoint]``; orbax is imported on first use.

Example:
    >>> import os, tempfile
    >>> import state_nn, state_random
    >>> state_random.seed(0)
    >>> model = state_nn.Linear(2, 2)
    >>> path = os.path.join(tempfile.mkdtemp(), 'ckpt')
    >>> state_nn.checkpoint.save(path, model)
    >>> saved = model.weight.value
    >>> model.weight.value = saved * 0
    >>> state_nn.checkpoint.restore(path, model)
    {}
    >>> bool((model.weight.value == saved).all())
    True
"""

from ._checkpoint import DEFAULT_PATH, FORMAT_VERSION, read_metadata, restore, save

__all__ = ["save", "restore", "read_metadata", "DEFAULT_PATH", "FORMAT_VERSION"]
