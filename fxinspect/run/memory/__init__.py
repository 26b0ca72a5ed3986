"""The memory model: every storage a run allocates, who made it and how long it lives.

``storages`` follows each storage through the run (``timeline`` its allocations and
queries), ``saved`` what autograd keeps for the backward, ``scratch`` and ``probe`` the
memory a kernel takes inside one op, ``lifetimes`` what the eager model holds past a
value's last use, ``resizes`` storages resized in place, ``optimizer`` the optimizer's
state and step; ``allocator`` and ``model_call`` the measured side (the allocator, on the
program and on the model's own call).
"""
