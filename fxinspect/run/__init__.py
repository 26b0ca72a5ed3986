"""The run layer: the instrumented program, the passes that run it, and assembly.

capture -> :mod:`~fxinspect.run.program` (probes between the ops) ->
:mod:`~fxinspect.run.passes` (each returns figures keyed by node name) ->
:mod:`~fxinspect.run.assemble` (records merged by name, summed by the field
declarations of :mod:`fxinspect.records.fields`).
"""
