"""One options record for every entry point: analyze's checks in the planning calls, and
the command line's analysis flags made from the record's declaration."""

from __future__ import annotations

import inspect

import pytest
import torch

import fxinspect
from fxinspect.cli import main


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


_CALLS = {
    "analyze": lambda **o: fxinspect.analyze(_mlp(), torch.randn(2, 8), **o),
    "sweep": lambda **o: fxinspect.sweep(_mlp(), lambda b: torch.randn(b, 8), [1, 2], **o),
    "max_batch": lambda **o: fxinspect.max_batch(_mlp(), lambda b: torch.randn(b, 8), "1MiB", **o),
    "checkpoint_plan": lambda **o: fxinspect.checkpoint_plan(_mlp(), torch.randn(2, 8), "1MiB", **o),
}


def _error(call, **options) -> str:
    with pytest.raises(fxinspect.InputError) as info:
        call(**options)
    return str(info.value)


@pytest.mark.parametrize("name", list(_CALLS))
def test_a_misspelt_option_is_the_error_analyze_gives_naming_the_closest(name):
    message = _error(_CALLS[name], repeets=3)
    assert message.startswith(f"{name}() has no option 'repeets' (did you mean 'repeats'?); its options are method,")
    # word for word analyze's, the caller's name aside
    assert message.removeprefix(name) == _error(_CALLS["analyze"], repeets=3).removeprefix("analyze")
    # a value analyze refuses is refused the same way
    assert _error(_CALLS[name], repeats=0) == "repeats must be an integer >= 1, got 0"


@pytest.mark.parametrize("name, own", [("sweep", "budget"), ("max_batch", "highest"), ("checkpoint_plan", "reserve")])
def test_a_misspelt_planning_parameter_names_the_parameter(name, own):
    misspelt = own[:-2] + own[-1] + own[-2]  # the last two letters swapped
    assert f"has no option {misspelt!r} (did you mean {own!r}?)" in _error(_CALLS[name], **{misspelt: 1})


@pytest.mark.parametrize("name", ["sweep", "max_batch", "checkpoint_plan"])
def test_the_planning_default_device_is_meta_in_the_signature_and_in_the_run(name):
    planning = inspect.signature(getattr(fxinspect, name)).parameters
    assert (
        planning["device"].default == "meta"
        and inspect.signature(fxinspect.analyze).parameters["device"].default is None
    )
    assert planning["repeats"].default == 10 and planning["optimizer"].default is None  # analyze's, spelled out
    # the default planning run is on meta: no value read, nothing timed (an analysis where the
    # model is would time the step: latency > 0)
    seen = []
    real = fxinspect.planning.points.point_of

    def spy(report, batch, seq):
        seen.append((report.environment.virtual, report.timing))
        return real(report, batch, seq)

    with pytest.MonkeyPatch.context() as patch:
        for module in ("shared", "points", "ahead"):
            patch.setattr(f"fxinspect.planning.{module}.point_of", spy)
        _CALLS[name](**({"workers": 0} if name == "sweep" else {}))
    assert seen and all(s == (True, None) for s in seen)


_ARGV = ["torch.nn:Linear", "--args", "[8, 4]", "--input-shape", "2,8"]


@pytest.mark.parametrize(
    "flags, expected",
    [
        # virtual (fake tensors), nothing timed, no values read
        (["--device", "meta"], dict(virtual=True, repeats=None, stats=False)),
        (["--no-timing"], dict(virtual=False, repeats=None, stats=True)),
        (["--warmup", "0", "--repeats", "3"], dict(virtual=False, repeats=(0, 3), stats=True)),
        (["--no-timing", "--no-check-finite"], dict(virtual=False, repeats=None, stats=False)),
    ],
)
def test_flags_made_from_the_options_declaration_reach_analyze(flags, expected, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main([*_ARGV, *flags, "--json", str(out)]) == 0, capsys.readouterr().err
    report = fxinspect.Report.from_json(out.read_text())
    assert report.environment.virtual == expected["virtual"]
    timing = report.timing
    assert (None if timing is None else (timing.warmup, timing.repeats)) == expected["repeats"]
    linear = next(n for n in report.nodes if n.is_op)
    assert (linear.outputs[0].stats is not None) == expected["stats"]
    assert report.totals.macs == 2 * 8 * 4  # the same model analysed every time


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--repeats", "0"], "repeats must be an integer >= 1, got 0"),
        (["--warmup", "two"], "argument --warmup: expected an integer, got 'two'"),
        (["--optimizer", "Adamw", "--backward"], "'Adamw' is not a torch.optim class; one of"),
        (["--no-memory", "--measure-memory"], "measure_memory=True measures the memory run beside its model"),
    ],
)
def test_generated_flags_are_checked_as_analyze_checks_them_before_the_model_is_built(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["no_such_module:build", "--input-shape", "1", *flags])  # (never built: checked first)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


# one name per idea: the old spellings still work one release, with a DeprecationWarning


@pytest.fixture(scope="module")
def report() -> fxinspect.Report:
    return fxinspect.analyze(_mlp(), torch.randn(2, 8), timing=False, device_spec="h100-sxm")


def _legend(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_to_networkx_takes_by_as_table_does_and_level_still_warns(report, recwarn):
    graph = report.to_networkx(by="module", depth=1)
    assert not [w for w in recwarn if w.category is DeprecationWarning]
    assert list(graph.nodes) == ["input", "0", "1", "2", "output"]  # the Sequential's three children
    with pytest.warns(DeprecationWarning, match=r"to_networkx: level= is now by="):
        old = report.to_networkx(level="module", depth=1)
    assert list(old.nodes) == list(graph.nodes) and list(old.edges) == list(graph.edges)


def test_plot_roofline_takes_color_by_as_plot_does_and_colour_by_still_warns(report, recwarn):
    by_op = _legend(report.plot_roofline(color_by="op"))
    assert not [w for w in recwarn if w.category is DeprecationWarning]
    assert by_op != _legend(report.plot_roofline())  # coloured by op kind, not by module
    with pytest.warns(DeprecationWarning, match=r"plot_roofline: colour_by= is now color_by="):
        assert _legend(report.plot_roofline(colour_by="op")) == by_op


def test_a_tracker_is_removed_as_watch_and_plans_are_and_unregister_still_warns(recwarn):
    model = _mlp()
    tracker = fxinspect.track(model, include=r"^0$").register()
    assert len(model[0]._forward_hooks) == 1 and len(model._forward_pre_hooks) == 1
    tracker.remove()
    assert not model[0]._forward_hooks and not model._forward_pre_hooks
    assert not [w for w in recwarn if w.category is DeprecationWarning]
    tracker.register()
    with pytest.warns(DeprecationWarning, match=r"Tracker: unregister\(\) is now remove\(\)"):
        tracker.unregister()
    assert not model[0]._forward_hooks and not model._forward_pre_hooks
