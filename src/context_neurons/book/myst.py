"""MyST to plain Markdown. This module rewrites the book's markup into what Colab renders.

The website (Jupyter Book) understands MyST: directives (```` ```{exercise} ````,
```` ```{admonition} ````, ``:::{note}``...), roles (``{ref}`label```, ``{math}`x```...) and
targets (``(label)=``). Colab shows them raw. :func:`to_markdown` turns them into Markdown:

- an exercise becomes a heading ``### Exercise 8.2: title`` (chapter 8's second, as on the
  website) and its text a blockquote;
- an admonition (``admonition``, ``note``, ``tip``, ``hint``...) a blockquote with a bold title,
  or, with ``:class: dropdown`` (and ``{dropdown}``), a collapsed ``<details>`` block;
- ``{math}`` becomes ``$...$``; ``{ref}``, ``{numref}`` and ``{doc}`` a link to the student notebook
  (or the repository's page) of their target, named by its title; ``{cite}`` plain text;
- targets ``(label)=`` are dropped, a ``{math}`` directive becomes a ``$$`` block.

Code fences that are not directives (```` ```python ````) are left as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from context_neurons.book.colab import REPOSITORY
from context_neurons.book.notebooks import BOOK, chapter_files, chapter_label

#: An opening fence: indentation, the fence (```, ````, :::...), the directive's name, arguments.
OPENING = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})(?:\{(?P<name>[\w:.-]+)\})?"
                     r"[ \t]*(?P<args>.*)$")
OPTION = re.compile(r"^[ \t]*:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")
ROLE = re.compile(r"\{(?P<name>[\w:.-]+)\}(?P<ticks>`+)(?P<content>.+?)(?P=ticks)")
TARGET = re.compile(r"^[ \t]*\((?P<label>[\w.:-]+)\)=[ \t]*$")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
#: A chapter source's comment prefix (jupytext py:percent markdown is commented).
SOURCE_TARGET = re.compile(r"^(?:# )?\((?P<label>[\w.:-]+)\)=[ \t]*\n(?:# )?#+[ \t]+(?P<title>.+)$",
                           re.M)
SOURCE_EXERCISE = re.compile(r"^(?:# )?(`{3,}|:{3,})\{exercise\}[ \t]*(?P<title>.*)\n"
                             r"(?P<options>(?:(?:# )?:[\w-]+:.*\n)*)", re.M)
SOURCE_LABEL = re.compile(r":label:[ \t]*(?P<label>\S+)")
DIFFICULTY = re.compile(r"\*Difficulty:\s*(?P<level>[\w-]+)")
ADMONITIONS = {"admonition", "note", "tip", "hint", "important", "warning", "caution",
               "attention", "danger", "error", "seealso", "dropdown", "topic", "sidebar",
               "margin", "epigraph", "card"}
DROPPED = {"solution", "solution-start", "solution-end", "toctree", "tableofcontents",
           "glue:figure", "glue:math", "glue"}
COLAB = "https://colab.research.google.com/github"


@dataclass
class Target:
    """Where a label points: its page (a chapter's stem or a page of ``book/``) and its title."""

    page: str
    title: str
    notebook: bool


@dataclass
class Context:
    """What converting needs to know: the labels of the whole book, the exercises' numbers, and
    the chapter being converted (its label numbers an exercise that has no ``:label:``)."""

    targets: dict[str, Target] = field(default_factory=dict)
    numbers: dict[str, str] = field(default_factory=dict)  # exercise label -> "8.2"
    chapter: str | None = None  # "8": what this page's exercise numbers start with
    counter: list[int] = field(default_factory=lambda: [0])  # this page's last number given out


def exercise_number(chapter: str | None, index: int) -> str:
    """An exercise's number as the website shows it: ``8.2`` is chapter 8's second exercise."""
    return f"{chapter}.{index}" if chapter else str(index)


def book_context(chapter: Path | None = None) -> Context:
    """The book's labels (chapters, pages, exercises), exercises numbered as the website does
    (``Exercise 8.2``, counted within each chapter in book order); ``chapter`` is the page about
    to be converted."""
    context = Context(chapter=chapter_label(chapter) if chapter else None)
    counts: dict[str | None, int] = {}
    pages = [(p, True) for p in chapter_files()] + [(p, False) for p in sorted(BOOK.glob("*.md"))]
    for path, notebook in pages:
        text = Path(path).read_text()
        for match in SOURCE_TARGET.finditer(text):
            context.targets[match["label"]] = Target(path.stem, _plain(match["title"]), notebook)
        if not notebook:
            continue
        page = chapter_label(path)
        for match in SOURCE_EXERCISE.finditer(text):
            counts[page] = counts.get(page, 0) + 1
            label = SOURCE_LABEL.search(match["options"])
            if label:
                number = exercise_number(page, counts[page])
                context.numbers[label["label"]] = number
                title = f"Exercise {number}" + (f": {match['title']}" if match["title"] else "")
                context.targets[label["label"]] = Target(path.stem, title, notebook)
    return context


def exercise_levels(chapter: Path) -> list[tuple[str, str, bool]]:
    """``(title, difficulty, has a hint)`` of each exercise of a chapter, from its source."""
    found = []
    text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#")
                     for line in Path(chapter).read_text().splitlines())
    for block in _blocks(text.splitlines()):
        if isinstance(block, Directive) and block.name == "exercise":
            body = "\n".join(block.body)
            level = DIFFICULTY.search(body)
            hint = bool(re.search(r"\{(hint|dropdown)\}|:class:[^\n]*dropdown|<details>", body))
            found.append((block.args, level["level"] if level else "", hint))
    return found


def to_markdown(source: str, context: Context) -> str:
    """A markdown cell's MyST turned into plain Markdown (see the module's description)."""
    out = []
    for block in _blocks(source.splitlines()):
        if isinstance(block, Directive):
            out.extend(_render(block, context))
        else:
            out.append(block)
    text = "\n".join(rewrite_roles("\n".join(out).splitlines(), context))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") if source.strip() else text


@dataclass
class Directive:
    name: str
    args: str
    options: dict[str, str]
    body: list[str]
    fence: str


def _blocks(lines: list[str]) -> list:
    """Lines and directives, in order. Plain code fences stay lines (their content untouched);
    a target line is dropped; roles are rewritten outside code fences."""
    blocks: list = []
    index = 0
    while index < len(lines):
        line = lines[index]
        opening = OPENING.match(line)
        if opening is None:
            if not TARGET.match(line):
                blocks.append(line)
            index += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        end = index + 1
        closing = re.compile(rf"^{re.escape(indent)}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        inner = [text[len(indent):] if text.startswith(indent) else text.lstrip()
                 for text in lines[index + 1:end]]
        if opening["name"] is None:  # a plain code fence: kept as it is
            blocks.extend(lines[index:end + 1])
        else:
            options, body = _options(inner)
            blocks.append(Directive(opening["name"], opening["args"].strip(), options, body,
                                    fence))
        index = end + 1
    return blocks


def _options(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """A directive's ``:key: value`` options (or a ``---`` YAML block) and the body after them."""
    options: dict[str, str] = {}
    index = 0
    if lines and lines[0].strip() == "---":
        index = 1
        while index < len(lines) and lines[index].strip() != "---":
            key, _, value = lines[index].partition(":")
            options[key.strip()] = value.strip()
            index += 1
        index += 1
    while index < len(lines) and OPTION.match(lines[index]):
        match = OPTION.match(lines[index])
        options[match["key"]] = match["value"].strip()
        index += 1
    return options, lines[index:]


def _render(block: Directive, context: Context) -> list[str]:
    """The Markdown lines of one directive."""
    name = block.name
    body = to_markdown("\n".join(block.body), context) if block.body else ""
    if name in DROPPED:
        return []
    if name == "exercise":
        label = block.options.get("label", "")
        if "nonumber" in block.options:
            heading = "Exercise"
        else:
            number = context.numbers.get(label)
            if number is None:
                context.counter[0] += 1
                number = exercise_number(context.chapter, context.counter[0])
            else:
                context.counter[0] = int(number.rsplit(".", 1)[-1])
            heading = f"Exercise {number}"
        title = _roles(block.args, context)
        return ["", f"### {heading}" + (f": {title}" if title else ""), "", *_quote(body), ""]
    if name == "math":
        return ["", "$$", body, "$$", ""]
    if name in ("code", "code-block", "sourcecode"):
        return [f"```{block.args}", *block.body, "```"]
    if name in ("figure", "image"):
        caption = _roles(" ".join(block.body).strip(), context)
        return ["", f"![{caption or block.options.get('alt', '')}]({block.args})", ""]
    title = _roles(block.args, context) or name.replace("-", " ").capitalize()
    if name == "admonition" and not block.args:
        title = "Note"
    if name == "dropdown" or "dropdown" in block.options.get("class", "").split():
        return ["", f"<details><summary><b>{title}</b></summary>", "", body, "", "</details>", ""]
    if name in ADMONITIONS:
        return ["", *_quote(f"**{title}**\n\n{body}" if body else f"**{title}**"), ""]
    return ["", f"**{title}**" if block.args else "", "", body, ""]


def _quote(text: str) -> list[str]:
    return [f"> {line}".rstrip() for line in text.splitlines()]


def _roles(text: str, context: Context) -> str:
    """Every role of a line of text rewritten (code spans and math left alone)."""
    return ROLE.sub(lambda match: _role(match, context), text)


def _role(match: re.Match, context: Context) -> str:
    name, content = match["name"], match["content"]
    if name == "math":
        return f"${content}$"
    if name in ("ref", "numref", "doc", "eq", "term", "any"):
        explicit = EXPLICIT.match(content)
        text, label = (explicit["text"], explicit["target"]) if explicit else ("", content)
        target = context.targets.get(label.strip().lstrip("/").split("/")[-1])
        if name == "numref" and text and target:
            text = text.replace("%s", target.title.split(":")[0]).replace("{number}", "")
        text = text or (target.title if target else label)
        return f"[{text}]({_url(target)})" if target else text
    if name in ("cite", "cite:p", "cite:t", "footcite"):
        return f"[{content}]"
    if name in ("sub", "subscript"):
        return f"<sub>{content}</sub>"
    if name in ("sup", "superscript"):
        return f"<sup>{content}</sup>"
    if name in ("kbd", "code", "file", "command", "program", "samp"):
        return f"`{content}`"
    if name.startswith("glue"):
        return "(see the website)"
    return content


def _url(target: Target) -> str:
    """A student notebook opens in Colab; another page of the book, on GitHub."""
    repository = REPOSITORY.removeprefix("https://github.com/")
    if target.notebook:
        return f"{COLAB}/{repository}/blob/main/book/students/{target.page}.ipynb"
    return f"{REPOSITORY}/blob/main/book/{target.page}.md"


def _plain(title: str) -> str:
    return re.sub(r"\s+", " ", title).strip()


def rewrite_roles(lines: list[str], context: Context) -> list[str]:
    """Roles rewritten in lines of Markdown, outside code fences."""
    out, fence = [], None
    for line in lines:
        opening = re.match(r"^[ \t>]*(`{3,}|~{3,})", line)
        if opening and (fence is None or opening[1].startswith(fence)):
            fence = None if fence else opening[1]
            out.append(line)
            continue
        out.append(line if fence else _roles(line, context))
    return out

