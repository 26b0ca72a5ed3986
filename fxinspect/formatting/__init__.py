"""Figures, shapes and names as text: the one place where base units become something to read.

Every view (tables, the summary, diagrams, the CLI) formats through these functions,
so a FLOP count, a size or a time reads the same everywhere. Values that were not
measured (``None``, NaN) print as :data:`MISSING`, never as ``0``. Figures in units
are in :mod:`.units`, shapes, dtypes and names in :mod:`.text`; both are read from
here (``from fxinspect import formatting as fmt``, then ``fmt.count(...)``).

Example
-------
>>> count(11_689_512), nbytes(44_629_152), seconds(0.0123), shape((1, 3, 224, 224))
('11.69 M', '42.56 MiB', '12.30 ms', '1×3×224×224')
"""

from . import text, units
from .text import *  # noqa: F403 - the package is its two halves
from .units import *  # noqa: F403

__all__ = [*units.__all__, *text.__all__]
