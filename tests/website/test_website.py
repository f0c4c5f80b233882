"""The built website, in a real browser: every page of the table of contents loads without console
errors, its figures and formulas render (MathJax served locally, no CDN), its internal links and
anchors resolve, chapters carry a Colab button that opens a notebook of the repository, the
interactive explorers show their static fallback (a figure and a table, no widget leftovers),
exercise solutions are collapsed dropdowns holding their code, and screenshots are saved to
``artifacts/screenshots/`` for a person to look at.

Which pages must show explorers and solutions is read from the pages' sources
(:func:`site_helpers.page_source`), not typed here.
"""

from __future__ import annotations

import re

import pytest
from site_helpers import (
    EXPAND_ALL,
    PAGE_FACTS,
    REPO,
    RENDERED_FACTS,
    WAIT_FOR_PAGE,
    broken_internal_links,
    chromium,
    is_notebook_page,
    page_source,
    serve,
    toc_pages,
)

from context_neurons.book import myst
from context_neurons.book.notebooks import chapter_label

pytestmark = pytest.mark.website

PAGES = toc_pages()
EXPLORER_PAGES = [page for page in PAGES if page_source(page).explorer_cells]
EXERCISE_PAGES = [page for page in PAGES if page_source(page).exercises]


@pytest.fixture(scope="module")
def served(site):
    with serve(site) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def browser():
    with chromium() as session:
        yield session


@pytest.fixture(scope="module")
def visited(site, served, browser, screenshots):
    """Visit every page once (in table-of-contents order); returns ``docname -> facts``.

    Facts are read twice: as the page first shows (dropdowns closed), then with every collapsed
    block opened (``rendered``: sizes of images and explorer outputs).
    """
    facts = {}
    for docname in PAGES:
        url = served + docname + ".html"
        browser.console_errors()  # flush
        browser.driver.get(url)
        waited = browser.driver.execute_async_script(WAIT_FOR_PAGE)
        page = browser.driver.execute_script(PAGE_FACTS)
        name = docname.replace("/", "_")
        browser.driver.save_screenshot(str(screenshots / f"{name}.png"))
        shoot_first(browser.driver, "img", screenshots / f"{name}_figure.png")
        shoot_first(
            browser.driver,
            "div.math, mjx-container[display='true']",
            screenshots / f"{name}_math.png",
        )
        shoot_first(browser.driver, ".solution", screenshots / f"{name}_solution_closed.png")
        if page["launch"]:  # chapters: the whole page as a reader first sees it
            shoot_full_page(browser.driver, screenshots / f"{name}_full.png")
        page["opened"] = browser.driver.execute_async_script(EXPAND_ALL)
        page["rendered"] = browser.driver.execute_script(RENDERED_FACTS)
        shoot_first(browser.driver, ".solution", screenshots / f"{name}_solution_open.png")
        shoot_explorers(browser.driver, screenshots / f"{name}_explorer")
        if page["launch"]:  # the rocket menu with the Colab button
            shoot_launch_menu(browser.driver, screenshots / f"{name}_launch.png")
        page.update(url=url, waited=waited, console_errors=browser.console_errors())
        facts[docname] = page
    return facts


def shoot_explorers(driver, stem) -> None:
    """Screenshot the output of every explorer cell (``<stem>_<i>.png``)."""
    outputs = driver.execute_script(
        "return Array.from(document.querySelectorAll('article div.cell'))"
        "  .filter(c => c.querySelector('.cell_input') &&"
        "               /\\b\\w+_explorer\\(/.test(c.querySelector('.cell_input').textContent))"
        "  .map(c => c.querySelector('.cell_output')).filter(Boolean);"
    )
    for index, output in enumerate(outputs):
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", output)
        output.screenshot(f"{stem}_{index}.png")


def shoot_full_page(driver, path, max_height: int = 16000) -> None:
    """Screenshot of the whole page (Chrome DevTools protocol), cut at ``max_height`` pixels."""
    import base64

    width, height = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight];"
    )
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(height, max_height), "scale": 1},
        },
    )
    path.write_bytes(base64.b64decode(shot["data"]))


def shoot_launch_menu(driver, path) -> None:
    """Click the launch (rocket) button and screenshot the page header with its menu open."""
    from selenium.webdriver.common.by import By

    driver.execute_script("window.scrollTo(0, 0);")
    buttons = driver.find_elements(By.CSS_SELECTOR, ".dropdown-launch-buttons button")
    if buttons:
        buttons[0].click()
        driver.save_screenshot(str(path))


def shoot_first(driver, selector: str, path) -> None:
    """Screenshot of the first element matching a CSS selector inside the article, if any."""
    from selenium.webdriver.common.by import By

    elements = driver.find_elements(By.CSS_SELECTOR, f"article {selector}")
    if elements:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", elements[0])
        elements[0].screenshot(str(path))


def test_toc_has_pages():
    assert PAGES[0] == "book/intro", "the introduction comes first"
    assert "book/ch01_decomposition" in PAGES and "book/appendix_planted_model" in PAGES


@pytest.mark.parametrize("docname", PAGES)
def test_page_built(site, docname):
    assert (site / f"{docname}.html").is_file(), f"{docname} is in _toc.yml but was not built"


@pytest.mark.parametrize("docname", PAGES)
def test_page_loads_without_console_errors(visited, docname):
    page = visited[docname]
    assert page["waited"] is True, page["waited"]
    assert page["title"] and "404" not in page["title"], page["title"]
    assert not page["console_errors"], "\n".join(page["console_errors"])


def rendered(element: dict) -> bool:
    """Shown on screen with a non-zero rendered size (``getBoundingClientRect``)."""
    return element["shown"] and element["rendered"]["w"] > 0 and element["rendered"]["h"] > 0


@pytest.mark.parametrize("docname", PAGES)
def test_figures_render(visited, docname):
    images = visited[docname]["rendered"]["images"]
    broken = [img["src"] for img in images if not (img["complete"] and img["width"] > 0)]
    assert not broken, f"images that did not load: {broken}"
    # Content images must be drawn (menus of the theme, such as the launch menu's Colab logo, stay
    # closed and only need to load).
    unseen = [
        f"{img['src']} ({img['rendered']})"
        for img in images
        if img["inArticle"] and not rendered(img)
    ]
    assert not unseen, f"figures loaded but not drawn (zero size or hidden): {unseen}"
    if is_notebook_page(docname) and docname != "book/appendix_planted_model":
        assert any("_images/" in img["src"] for img in images), "chapter without figures"


#: How a page's model banner starts (``book.chapter.show_model_banner``).
BANNER = re.compile(r"^[A-Z0-9 .()-]+ -- Outputs on this page")


@pytest.mark.parametrize("docname", PAGES)
def test_model_banner_fits_the_text_column(visited, docname):
    """The banner that names the page's model is read without sideways scrolling at 1280 px."""
    banners = [o for o in visited[docname]["outputs"] if BANNER.search(o["first"])]
    if is_notebook_page(docname):
        assert banners, "a chapter without its model banner"
    wide = [f"{o['first'][:40]}... ({o['overflow']} px too wide)" for o in banners
            if o["overflow"] > 0]
    assert not wide, f"banners wider than the text column: {wide}"


@pytest.mark.parametrize("docname", PAGES)
def test_outputs_fit_the_text_column(visited, docname):
    """Every printed output and result table, collapsed ones opened, is read without sideways
    scrolling at 1280 px (result tables are HTML: ``printing.show_table``)."""
    wide = [
        f"{o['tag']} {o['first'][:50]!r}... ({o['overflow']} px too wide)"
        for o in visited[docname]["rendered"]["outputBlocks"]
        if o["overflow"] > 1
    ]
    assert not wide, "outputs wider than the text column:\n" + "\n".join(wide)


@pytest.mark.parametrize("docname", PAGES)
def test_result_tables_name_their_model(visited, docname):
    """Every rendered result table carries its caption, "<model>: <what>"."""
    tables = [o for o in visited[docname]["rendered"]["outputBlocks"] if o["result"]]
    unnamed = [o["first"][:50] for o in tables if ": " not in o["first"]]
    assert not unnamed, f"result tables without a caption naming the model: {unnamed}"


#: A figure has at least this many image pixels per CSS pixel it is drawn at (retina PNG: 2).
MIN_PIXEL_DENSITY = 1.9


@pytest.mark.parametrize("docname", PAGES)
def test_figures_are_sharp(visited, docname):
    """Chapter figures are stored at twice the density they are drawn at (sharp on a laptop)."""
    blurry = [
        f"{img['src'].rsplit('/', 1)[-1]}: {img['width']} px drawn at {img['rendered']['w']:.0f}"
        for img in visited[docname]["rendered"]["images"]
        if img["inArticle"] and "_images/" in img["src"] and rendered(img)
        and img["width"] < MIN_PIXEL_DENSITY * img["rendered"]["w"]
    ]
    assert not blurry, f"figures stored below {MIN_PIXEL_DENSITY}x their drawn width: {blurry}"
    squashed = [
        img["src"].rsplit("/", 1)[-1]
        for img in visited[docname]["rendered"]["images"]
        if img["inArticle"] and "_images/" in img["src"] and rendered(img) and img["height"]
        and abs(img["rendered"]["h"] / img["rendered"]["w"] - img["height"] / img["width"])
        > 0.02 * img["height"] / img["width"]
    ]
    assert not squashed, f"figures drawn with another aspect ratio than stored: {squashed}"


@pytest.mark.parametrize("docname", PAGES)
def test_math_renders_offline(visited, docname):
    page = visited[docname]
    if page["mathSources"] == 0:
        return
    assert page["mathjaxScripts"], "a page with math does not load MathJax"
    remote = [
        src for src in page["mathjaxScripts"] if not src.startswith(page["url"].split("/book/")[0])
    ]
    assert not remote, f"MathJax is loaded from outside the site: {remote}"
    assert (
        page["mathRendered"] >= page["mathSources"]
    ), f"{page['mathSources']} formulas, {page['mathRendered']} typeset by MathJax"
    assert page["mathErrors"] == 0, f"{page['mathErrors']} MathJax errors"
    assert page["mathRaw"] == 0, f"{page['mathRaw']} formulas left as raw TeX"


@pytest.mark.parametrize("docname", PAGES)
def test_internal_links_resolve(site, served, visited, docname):
    page = visited[docname]
    broken = broken_internal_links(page["url"], page["hrefs"], served, site)
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("docname", [page for page in PAGES if is_notebook_page(page)])
def test_colab_button_opens_a_notebook(visited, docname):
    links = visited[docname]["launch"]
    assert links, f"{docname}: no Colab launch button"
    for link in links:
        path = link.split("/blob/", 1)[1].split("/", 1)[1]  # after the branch
        assert path.endswith(".ipynb"), f"Colab cannot open {path}"
        assert (REPO / path).is_file(), f"the Colab button opens {path}, which is not in the repo"
        assert path.startswith("book/students/"), f"Colab opens {path}, not the student notebook"
        text = (REPO / path).read_text()
        assert "check passed" not in text and "solution-start" not in text, (
            f"the student notebook {path} shows a solution"
        )


def test_pages_with_explorers_and_exercises_found():
    """The sources name pages to check (else the two tests below would check nothing)."""
    assert EXPLORER_PAGES, "no page of the table of contents calls an explorer (*_explorer(...))"
    assert EXERCISE_PAGES, "no page of the table of contents has an {exercise}"


@pytest.mark.parametrize("docname", EXPLORER_PAGES)
def test_explorers_render_their_static_fallback(visited, docname):
    """Each explorer cell shows a figure and a table, drawn, and nothing of a widget."""
    facts = visited[docname]["rendered"]
    explorers = facts["explorers"]
    expected = page_source(docname).explorer_cells
    assert len(explorers) == expected, (
        f"the source has {expected} explorer cell(s), the page shows {len(explorers)} "
        "(an explorer cell with remove-input cannot be checked)"
    )
    problems = []
    for explorer in explorers:
        where = explorer["code"]
        if not explorer["output"]:
            problems.append(f"{where}: no output")
            continue
        if not any(rendered(img) and img["width"] > 0 for img in explorer["images"]):
            problems.append(f"{where}: no drawn figure in the output: {explorer['images']}")
        if not any(rendered(table) and table["rows"] > 1 for table in explorer["tables"]):
            problems.append(f"{where}: no drawn table in the output: {explorer['tables']}")
        if explorer["widgetNodes"]:
            problems.append(f"{where}: {explorer['widgetNodes']} widget element(s) in the output")
        if explorer["widgetText"] is not None:
            problems.append(f"{where}: widget text {explorer['widgetText']!r} in the output")
    assert not problems, "\n".join(problems)
    assert facts["widgetNodes"] == 0, "widget views (application/vnd.jupyter.widget-*) on the page"
    assert not facts["widgetScripts"], f"widget scripts loaded: {facts['widgetScripts']}"
    assert not facts["loadingWidget"], "'Loading widget' shown on the page"


#: An exercise's title and a solution's reference to its exercise, as sphinx-exercise writes them.
EXERCISE_TITLE = re.compile(r'<div class="exercise[^"]*" id="(?P<label>[^"]+)">\s*'
                            r'<p class="admonition-title"><span class="caption-number">'
                            r'Exercise (?P<number>[^ <]+) ?</span>')
SOLUTION_TITLE = re.compile(r'Solution to<a class="reference internal" href="#(?P<label>[^"]+)">'
                            r' Exercise (?P<number>[^ <]+)[ <]')


@pytest.mark.parametrize("docname", EXERCISE_PAGES)
def test_exercises_are_numbered_within_their_chapter(site, docname):
    """Exercise 8.2 is chapter 8's second, on the page, in its solution's title and in the student
    notebook (numbered by :mod:`context_neurons.book.myst`)."""
    html = (site / f"{docname}.html").read_text(encoding="utf-8")
    chapter = chapter_label(docname)
    shown = [(m["label"], m["number"]) for m in EXERCISE_TITLE.finditer(html)]
    assert len(shown) == page_source(docname).exercises, f"exercise titles found: {shown}"
    assert [number for _, number in shown] == [f"{chapter}.{k}" for k in range(1, len(shown) + 1)]
    students = myst.book_context().numbers
    assert all(students[label] == number for label, number in shown), (shown, students)
    solutions = [(m["label"], m["number"]) for m in SOLUTION_TITLE.finditer(html)]
    assert solutions and set(solutions) <= set(shown), solutions


@pytest.mark.parametrize("docname", EXERCISE_PAGES)
def test_solutions_are_collapsed_dropdowns_holding_their_code(site, visited, docname):
    """Gated solutions: each a closed dropdown that holds the checked code and opens on a click."""
    page = visited[docname]
    labels = page_source(docname).solutions
    solutions = page["solutions"]
    assert len(solutions) == len(labels) >= 1, (
        f"the source has gated solutions {list(labels)}, the page {len(solutions)} solution blocks"
    )
    html = (site / f"{docname}.html").read_text(encoding="utf-8")
    assert html.count('class="solution dropdown') == len(labels), "solutions not in a dropdown"
    for solution, label in zip(solutions, labels):
        assert {"solution", "dropdown"} <= set(solution["classes"]), (label, solution["classes"])
        assert solution["button"], f"{label}: no toggle button (sphinx-togglebutton)"
        assert solution["checkCells"] >= 1, f"{label}: the checked code is not inside the solution"
        assert solution["shownCells"] == 0, f"{label}: the solution's code shows before a click"
    assert page["checksOutsideSolutions"] == 0, "solution code (a 'check passed' print) outside"
    assert all(page["rendered"]["solutionsOpen"]), "a solution's code does not show once opened"
