"""The built website, in a real browser: every page of the table of contents loads without console
errors, its figures and formulas render (MathJax served locally, no CDN), its internal links and
anchors resolve, chapters carry a Colab button that opens a notebook of the repository, and a few
screenshots are saved to ``artifacts/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import pytest
from site_helpers import (
    PAGE_FACTS,
    REPO,
    WAIT_FOR_PAGE,
    broken_internal_links,
    chromium,
    is_notebook_page,
    serve,
    toc_pages,
)

pytestmark = pytest.mark.website

PAGES = toc_pages()


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
    """Visit every page once (in table-of-contents order); returns ``docname -> facts``."""
    facts = {}
    for docname in PAGES:
        url = served + docname + ".html"
        browser.console_errors()  # flush
        browser.driver.get(url)
        waited = browser.driver.execute_async_script(WAIT_FOR_PAGE)
        page = browser.driver.execute_script(PAGE_FACTS)
        page.update(url=url, waited=waited, console_errors=browser.console_errors())
        name = docname.replace("/", "_")
        browser.driver.save_screenshot(str(screenshots / f"{name}.png"))
        shoot_first(browser.driver, "img", screenshots / f"{name}_figure.png")
        shoot_first(
            browser.driver,
            "div.math, mjx-container[display='true']",
            screenshots / f"{name}_math.png",
        )
        if page["launch"]:  # chapters: the whole page, and the rocket menu with the Colab button
            shoot_full_page(browser.driver, screenshots / f"{name}_full.png")
            shoot_launch_menu(browser.driver, screenshots / f"{name}_launch.png")
        facts[docname] = page
    return facts


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


@pytest.mark.parametrize("docname", PAGES)
def test_figures_render(visited, docname):
    page = visited[docname]
    broken = [img["src"] for img in page["images"] if not (img["complete"] and img["width"] > 0)]
    assert not broken, f"images that did not load: {broken}"
    if is_notebook_page(docname) and docname != "book/appendix_planted_model":
        assert any("_images/" in img["src"] for img in page["images"]), "chapter without figures"


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
