"""Website test helpers. This module serves a built book on localhost and drives headless Chromium.

Used by ``test_website.py``; nothing here reaches beyond 127.0.0.1. Chromium and ChromeDriver are
Debian's (``/usr/bin/chromium``, ``/usr/bin/chromedriver``; ``.ci/run`` installs them), driven with
Selenium, started with the flags a machine without internet needs (no background networking, no
component updates, no QUIC) and a fresh profile.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

REPO = Path(__file__).resolve().parents[2]
#: Where the pages' sources are (the directory ``jupyter-book build`` was run in); another book
#: (a small test site) sets ``$CONTEXT_NEURONS_BOOK_ROOT`` with ``$CONTEXT_NEURONS_TOC``.
BOOK_ROOT = Path(os.environ.get("CONTEXT_NEURONS_BOOK_ROOT") or REPO)
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """Serve ``directory`` over HTTP on 127.0.0.1 at a free port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def toc_pages(repo: Path = BOOK_ROOT) -> list[str]:
    """Docnames of every page in ``_toc.yml`` (root first), e.g. ``book/intro``.

    ``$CONTEXT_NEURONS_TOC`` names another table of contents, for a site built with
    ``jupyter-book build . --toc FILE``.
    """
    import yaml

    toc_file = Path(os.environ.get("CONTEXT_NEURONS_TOC") or repo / "_toc.yml")
    toc = yaml.safe_load(toc_file.read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return [re.sub(r"\.(md|py|ipynb)$", "", page) for page in pages]


def is_notebook_page(docname: str, repo: Path = BOOK_ROOT) -> bool:
    """Whether a page is an executed chapter (a jupytext ``.py`` or an ``.ipynb``)."""
    return any((repo / f"{docname}{suffix}").is_file() for suffix in (".py", ".ipynb"))


# What the sources say a page must show ------------------------------------------------------

EXPLORER_CALL = re.compile(r"\b\w+_explorer\(")
EXERCISE = re.compile(r"^(?:`{3,}|:{3,})\{exercise\}", re.M)
SOLUTION_START = re.compile(r"^(?:`{3,}|:{3,})\{solution-start\}\s+(\S+)", re.M)


@dataclass(frozen=True)
class PageSource:
    """What a page's source asks the site to show.

    Attributes:
        explorer_cells: code cells that call an interactive explorer (``head_explorer(...)``,
            ``activation_explorer(...)``, ``contribution_explorer(...)``).
        exercises: ``{exercise}`` directives.
        solutions: labels of the gated solutions (``{solution-start} label``), in order.
    """

    explorer_cells: int = 0
    exercises: int = 0
    solutions: tuple[str, ...] = ()


def _code_without_comments(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))


@functools.lru_cache(maxsize=None)
def page_source(docname: str, repo: Path = BOOK_ROOT) -> PageSource:
    """What a page's source (jupytext ``.py``, ``.ipynb`` or MyST ``.md``) asks to show."""
    markdown, code = [], []
    for suffix in (".py", ".ipynb", ".md"):
        path = repo / f"{docname}{suffix}"
        if not path.is_file():
            continue
        if suffix == ".md":
            markdown.append(path.read_text(encoding="utf-8"))
            break
        import jupytext

        notebook = jupytext.read(path, fmt="py:percent" if suffix == ".py" else None)
        for cell in notebook.cells:
            (code if cell.cell_type == "code" else markdown).append(cell.source)
        break
    text = "\n".join(markdown)
    return PageSource(
        explorer_cells=sum(bool(EXPLORER_CALL.search(_code_without_comments(c))) for c in code),
        exercises=len(EXERCISE.findall(text)),
        solutions=tuple(SOLUTION_START.findall(text)),
    )


class _Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)


@functools.lru_cache(maxsize=None)
def anchors(path: Path) -> frozenset[str]:
    """The ``id`` (and ``name``) attributes of an HTML file."""
    parser = _Anchors()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.ids)


def broken_internal_links(page_url: str, hrefs: list[str], base_url: str, site: Path) -> list[str]:
    """Links from a page to a local page (or anchor) that does not exist in the built site.

    Args:
        page_url: the URL of the page the links are on.
        hrefs: the links' ``href`` attributes as written.
        base_url: the URL the site is served at.
        site: the built site's directory.

    Returns:
        ``"href -> reason"`` for every broken link.
    """
    broken = []
    for href in hrefs:
        if not href or href.startswith(("mailto:", "javascript:", "data:")):
            continue
        url = urljoin(page_url, href)
        if not url.startswith(base_url):
            continue  # external: not checked offline
        parts = urlsplit(url)
        relative = unquote(parts.path[len(urlsplit(base_url).path) :])
        target = site / relative
        if relative == "" or relative.endswith("/"):
            target = target / "index.html"
        if not target.is_file():
            broken.append(f"{href} -> {target.relative_to(site)} missing")
            continue
        if parts.fragment and target.suffix == ".html" and parts.fragment not in anchors(target):
            broken.append(f"{href} -> no anchor #{parts.fragment} in {target.relative_to(site)}")
    return broken


@dataclass
class Browser:
    """A headless Chromium session (Selenium), with its fresh profile directory."""

    driver: object
    profile: Path
    logs: list = field(default_factory=list)

    def console_errors(self) -> list[str]:
        """Console messages of level SEVERE since the last call."""
        entries = self.driver.get_log("browser")
        return [
            f"{entry['source']}: {entry['message']}"
            for entry in entries
            if entry["level"] == "SEVERE"
        ]


@contextlib.contextmanager
def chromium():
    """Start headless Chromium through ChromeDriver; yields a :class:`Browser`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for binary in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(binary):
            raise FileNotFoundError(
                f"{binary} not found: install Debian's chromium and chromium-driver "
                f"(apt-get install chromium chromium-driver; .ci/run does)."
            )
    profile = Path(tempfile.mkdtemp(prefix="chromium-profile-"))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    try:
        yield Browser(driver=driver, profile=profile)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# JavaScript run in the page -------------------------------------------------------------------

#: Waits (async script) until the page is loaded, every image has finished loading or failed, and
#: MathJax (when the page loads it) has typeset.
WAIT_FOR_PAGE = """
const done = arguments[arguments.length - 1];
(async () => {
  if (document.readyState !== "complete") {
    await new Promise(resolve => window.addEventListener("load", resolve, {once: true}));
  }
  for (const img of document.images) { img.loading = "eager"; }
  await Promise.all(Array.from(document.images).map(img => img.complete ? null :
      new Promise(resolve => { img.addEventListener("load", resolve); img.addEventListener("error", resolve); })));
  const hasMathJax = Array.from(document.scripts).some(s => /mathjax/i.test(s.src));
  if (hasMathJax) {
    for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++) {
      await new Promise(resolve => setTimeout(resolve, 50));
    }
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  }
  done(true);
})().catch(error => done(String(error)));
"""

#: JavaScript helpers shared by the scripts below: is an element shown (not ``display: none``,
#: ``visibility: hidden`` or transparent, as sphinx-togglebutton leaves collapsed content), and its
#: rendered size.
_JS_HELPERS = """
const shown = el => el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true,
                                        opacityProperty: true, visibilityProperty: true});
const size = el => { const r = el.getBoundingClientRect(); return {w: r.width, h: r.height}; };
const CHECK = /print\\(\\s*f?["']check passed/;
const EXPLORER = /\\b\\w+_explorer\\(/;
"""

#: What the test checks, read from the rendered page as a reader first sees it (dropdowns closed).
PAGE_FACTS = (
    _JS_HELPERS
    + """
const scripts = Array.from(document.scripts).map(s => s.src).filter(Boolean);
const codeCells = Array.from(document.querySelectorAll("article div.cell"))
    .filter(cell => cell.querySelector(".cell_input"));
return {
  title: document.title,
  mathSources: document.querySelectorAll(".math").length,
  mathRendered: document.querySelectorAll("mjx-container").length,
  mathErrors: document.querySelectorAll("mjx-merror, merror").length,
  mathRaw: Array.from(document.querySelectorAll(".math"))
      .filter(el => !el.querySelector("mjx-container")).length,
  mathjaxScripts: scripts.filter(src => /mathjax/i.test(src)),
  hrefs: Array.from(document.querySelectorAll("a[href]")).map(a => a.getAttribute("href")),
  launch: Array.from(document.querySelectorAll("a[href*='colab.research.google.com']"))
      .map(a => a.getAttribute("href")),
  solutions: Array.from(document.querySelectorAll("article .solution")).map(s => ({
      id: s.id,
      classes: Array.from(s.classList),
      button: !!s.querySelector(".admonition-title button.toggle-button"),
      checkCells: Array.from(s.querySelectorAll("div.cell .cell_input"))
          .filter(input => CHECK.test(input.textContent)).length,
      shownCells: Array.from(s.querySelectorAll("div.cell")).filter(shown).length,
  })),
  checksOutsideSolutions: codeCells
      .filter(cell => CHECK.test(cell.querySelector(".cell_input").textContent))
      .filter(cell => !cell.closest(".solution")).length,
  // printed output blocks: their first line, and how far they overflow their box (px)
  outputs: Array.from(document.querySelectorAll("article div.cell_output pre")).filter(shown)
      .map(pre => ({first: pre.textContent.split("\\n")[0].slice(0, 80),
                    overflow: pre.scrollWidth - pre.clientWidth})),
};
"""
)

#: Opens every collapsed block (sphinx-togglebutton buttons, ``<details>``) so that what it holds
#: can be measured; waits for the transitions; returns how many were opened.
EXPAND_ALL = """
const done = arguments[arguments.length - 1];
const buttons = Array.from(document.querySelectorAll("button.toggle-button.toggle-button-hidden"));
buttons.forEach(button => button.click());
const details = Array.from(document.querySelectorAll("details:not([open])"));
details.forEach(d => { d.open = true; });
setTimeout(() => done(buttons.length + details.length), 800);
"""

#: What is rendered once every block is open: images and the explorers' outputs, with their
#: rendered sizes, widget leftovers, and whether the solutions' code now shows.
RENDERED_FACTS = (
    _JS_HELPERS
    + """
const WIDGET_NODES = "script[type^='application/vnd.jupyter.widget'], .jupyter-widgets, " +
    ".widget-area, .widget-subarea, [data-mime-type*='jupyter.widget']";
const WIDGET_TEXT =
    /Loading widget|\\b(?:VBox|HBox|Dropdown|IntSlider|IntText|Textarea|Output)\\(|<Explorer/;
const explorerCells = Array.from(document.querySelectorAll("article div.cell"))
    .filter(cell => { const input = cell.querySelector(".cell_input");
                      return input && EXPLORER.test(input.textContent); });
return {
  images: Array.from(document.images).map(img => ({
      src: img.currentSrc || img.src, complete: img.complete, width: img.naturalWidth,
      height: img.naturalHeight, rendered: size(img), shown: shown(img), inArticle: !!img.closest("article")})),
  explorers: explorerCells.map(cell => {
      const out = cell.querySelector(".cell_output");
      return {
        code: cell.querySelector(".cell_input pre").textContent.split("\\n")
            .find(line => EXPLORER.test(line)).trim(),
        output: !!out,
        images: out ? Array.from(out.querySelectorAll("img")).map(img => ({
            src: img.currentSrc || img.src, width: img.naturalWidth, rendered: size(img),
            shown: shown(img)})) : [],
        tables: out ? Array.from(out.querySelectorAll("table")).map(t => ({
            rows: t.rows.length, rendered: size(t), shown: shown(t)})) : [],
        widgetNodes: out ? out.querySelectorAll(WIDGET_NODES).length : 0,
        widgetText: out ? (out.innerText.match(WIDGET_TEXT) || [null])[0] : null,
      };
  }),
  widgetNodes: document.querySelectorAll(WIDGET_NODES).length,
  widgetScripts: Array.from(document.scripts).map(s => s.src)
      .filter(src => /jupyter-widgets|html-manager|embed-amd/.test(src)),
  loadingWidget: /Loading widget/.test(document.body.innerText),
  solutionsOpen: Array.from(document.querySelectorAll("article .solution")).map(s =>
      Array.from(s.querySelectorAll("div.cell")).every(shown)),
  // every output block (printed text, result tables), collapsed ones opened, and how many pixels
  // it reaches past the text column (its own scrolling, or its right edge past the column's)
  outputBlocks: Array.from(document.querySelectorAll(
      "article div.cell_output pre, article div.cell_output table")).filter(shown).map(el => {
    const article = el.closest("article");
    const column = article.getBoundingClientRect().right -
        parseFloat(getComputedStyle(article).paddingRight);
    const label = el.tagName === "TABLE" && el.caption ? el.caption.textContent : el.textContent;
    return {tag: el.tagName.toLowerCase(), result: el.classList.contains("result-table"),
            first: label.trim().split("\\n")[0].slice(0, 80),
            overflow: Math.max(el.scrollWidth - el.clientWidth,
                               Math.ceil(el.getBoundingClientRect().right - column))};
  }),
};
"""
)
