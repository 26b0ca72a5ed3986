"""Receptive fields: which input positions each output position of a node can see.

``fields`` the field record and its arithmetic, ``ops`` the aten ops that change a field,
``views`` those that move positions without mixing them, ``tracker`` follows the fields
along one run.
"""
