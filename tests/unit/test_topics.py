"""Topic word lists and the British/American respelling used by the case studies."""

from __future__ import annotations

import pytest

from context_neurons.text.topics import BUILTIN_GB_US, swap_spellings


def test_swap_spellings_makes_a_minimal_pair():
    text = "The Color of the harbor: my favorite color. Colorado stays."
    british, count = swap_spellings(text, BUILTIN_GB_US, to="british")
    assert british == "The Colour of the harbour: my favourite colour. Colorado stays."
    assert count == 4
    back, count = swap_spellings(british, BUILTIN_GB_US, to="american")
    assert back == text and count == 4


def test_swap_spellings_rejects_an_unknown_variety():
    with pytest.raises(ValueError, match="british"):
        swap_spellings("colour", BUILTIN_GB_US, to="australian")
