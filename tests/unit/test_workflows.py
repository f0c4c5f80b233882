"""The publishing workflow (``.github/workflows/book.yml``) and the maintainers' page that documents
it (``book/publishing.md``): the corpora are fetched before the build, cached by the dataset's
version, a failed fetch does not stop the website, and every step the page names is one command."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def book_steps() -> list[dict]:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    return workflow["jobs"]["build"]["steps"]


def step_index(steps: list[dict], pattern: str) -> int:
    matches = [i for i, step in enumerate(steps) if re.search(pattern, step.get("name", ""))]
    assert len(matches) == 1, (pattern, [step.get("name") for step in steps])
    return matches[0]


def test_the_website_build_fetches_the_corpora_first_and_survives_a_missing_release():
    steps = book_steps()
    fetch = steps[step_index(steps, r"^Fetch the offline corpora")]
    assert "fetch-corpora" in fetch["run"] and fetch.get("continue-on-error") is True
    # the chapters see the corpora only when the fetch succeeded (the line after the command)
    lines = [line.strip() for line in fetch["run"].splitlines() if line.strip()
             and not line.strip().startswith("#")]
    assert lines[0].startswith("python -m context_neurons fetch-corpora")
    assert lines[-1].startswith('echo "CONTEXT_NEURONS_CORPORA=') and "GITHUB_ENV" in lines[-1]
    cache = steps[step_index(steps, r"^Cache the offline corpora")]
    assert cache["with"]["key"] == "corpora-v${{ steps.corpora.outputs.version }}"
    assert step_index(steps, r"^The corpora dataset's version") < steps.index(cache)
    assert steps.index(cache) < steps.index(fetch) < step_index(steps, r"^Build the book")
    # the executed chapters are cached after the fetch, keyed by whether the corpora arrived: a
    # page built before the release was uploaded (no verdict) is never reused once it is
    executed = steps[step_index(steps, r"^Cache executed chapters")]
    assert steps.index(fetch) < steps.index(executed) < step_index(steps, r"^Build the book")
    assert "steps.fetch.outcome == 'success' && steps.corpora.outputs.version" in \
        executed["with"]["key"]
    summary = steps[step_index(steps, r"^Chapter execution times \(job summary\)")]
    assert "steps.fetch.outcome" in summary["run"]
    verdict = steps[step_index(steps, r"^GPT-2 Small's verdict")]
    assert "recorded_lines('gpt2')" in verdict["run"] and "GITHUB_STEP_SUMMARY" in verdict["run"]
    # chapter 8 records the lines it computed; the summary prints them (not computed twice)
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    assert workflow["jobs"]["build"]["env"]["CONTEXT_NEURONS_VERDICT_RECORD"].endswith(".json")


def test_the_publishing_page_gives_one_command_per_step():
    page = (ROOT / "book" / "publishing.md").read_text()
    steps = re.split(r"\n## \d\. ", page)[1:]
    assert len(steps) == 5
    for step in steps:
        blocks = re.findall(r"```\n(.*?)```", step, flags=re.S)
        assert blocks, step.splitlines()[0]
        assert "**If missing**" in step, step.splitlines()[0]
    commands = "\n".join(re.findall(r"```\n(.*?)```", page, flags=re.S))
    for expected in ("set-repository https://github.com/OWNER/NAME",
                     "scripts/build_corpora_release.py", "--upload", "gh workflow run book.yml"):
        assert expected in commands
    assert (ROOT / "scripts" / "build_corpora_release.py").is_file()
