"""The run layer: the instrumented program, the passes that run it, and assembly.

capture -> :mod:`~fxinspect.run.program` (probes between the ops) ->
:mod:`~fxinspect.run.passes` (each returns figures keyed by node name) ->
:mod:`~fxinspect.run.assemble` (records merged by name, summed by the field
declarations of :mod:`fxinspect.records.fields`).

A run is one call of :func:`~fxinspect.run.passes.one_run.run_once` with a list of
:mod:`~fxinspect.run.recorders`; the memory model (:mod:`~fxinspect.run.memory`) and
the receptive field (:mod:`~fxinspect.run.receptive`) are subpackages of their own.
"""
