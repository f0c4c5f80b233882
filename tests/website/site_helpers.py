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


def toc_pages(repo: Path = REPO) -> list[str]:
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


def is_notebook_page(docname: str, repo: Path = REPO) -> bool:
    """Whether a page is an executed chapter (a jupytext ``.py`` or an ``.ipynb``)."""
    return any((repo / f"{docname}{suffix}").is_file() for suffix in (".py", ".ipynb"))


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

#: What the test checks, read from the rendered page.
PAGE_FACTS = """
const scripts = Array.from(document.scripts).map(s => s.src).filter(Boolean);
return {
  title: document.title,
  images: Array.from(document.images).map(img => ({
      src: img.currentSrc || img.src, complete: img.complete, width: img.naturalWidth})),
  mathSources: document.querySelectorAll(".math").length,
  mathRendered: document.querySelectorAll("mjx-container").length,
  mathErrors: document.querySelectorAll("mjx-merror, merror").length,
  mathRaw: Array.from(document.querySelectorAll(".math"))
      .filter(el => !el.querySelector("mjx-container")).length,
  mathjaxScripts: scripts.filter(src => /mathjax/i.test(src)),
  hrefs: Array.from(document.querySelectorAll("a[href]")).map(a => a.getAttribute("href")),
  launch: Array.from(document.querySelectorAll("a[href*='colab.research.google.com']"))
      .map(a => a.getAttribute("href")),
};
"""
