"""A long run's phases (:class:`context_neurons.progress.Phases`): named on stderr when asked,
seconds added up per name, kept when a phase raises."""

from __future__ import annotations

import pytest

from context_neurons.progress import Phases


def test_phases_announce_time_and_add_up(capsys):
    phases = Phases("main job", announce=True, say_seconds=True)
    with phases("taxonomy"):
        pass
    with phases("taxonomy"):
        pass
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "main job: taxonomy ..." and err[1].startswith("main job: taxonomy: ")
    assert len(err) == 4 and list(phases.seconds) == ["taxonomy"]
    assert phases.seconds["taxonomy"] >= 0.0


def test_silent_phases_still_count_and_a_failing_phase_keeps_its_time(capsys):
    phases = Phases("protocol v3")
    with pytest.raises(ValueError):
        with phases("data"):
            raise ValueError("no documents")
    assert "data" in phases.seconds
    assert capsys.readouterr().err == ""
