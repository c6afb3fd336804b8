"""nbgrader's formgrader, opened from JupyterLab's Nbgrader menu in headless Chromium, on a graded class of
assignment 10: its Manage Students table shows each learner and score; saves
``artifacts/screenshots/formgrader.png``; skipped, saying why, without Chromium.
"""

from __future__ import annotations

import os
import sys
import time

import nbformat
import pytest
from test_classroom import ASSIGNMENT, EXERCISES, NOTEBOOK, submission, the_class
from test_jupyterlab_browser import running_lab, screenshot

from helpers.grading import classroom
from helpers.grading.exercises import requirements

pytestmark = pytest.mark.browser

# right, one requirement broken in each, empty, raising (the class proof has them all)
LEARNERS = (
    "ada",
    "bob",
    "cy",
    "dee",
)
PAGE_TIMEOUT_S = 90


@pytest.fixture
def graded_course(tmp_path):
    """A course whose assignment 10 is released, submitted by ``LEARNERS`` and autograded; their totals."""
    course = tmp_path / "course"
    classroom.generate(course, [ASSIGNMENT[:2]])
    classroom.nbgrader(course, "generate_assignment", ASSIGNMENT)
    source = nbformat.read(course / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    learners = the_class(classroom.solutions(source))
    for learner in LEARNERS:
        folder = course / "submitted" / learner / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(submission(release, learners[learner][0]), folder / NOTEBOOK)
    classroom.nbgrader(course, "autograde", ASSIGNMENT)
    return course, {learner: sum(learners[learner][1].values()) for learner in LEARNERS}


@pytest.fixture
def browser(tmp_path, chromium):
    driver = chromium(
        tmp_path / "chromium-profile", window="1400,1000", log=tmp_path / "chromedriver.log"
    )
    yield driver
    driver.quit()


@pytest.fixture
def lab(tmp_path, graded_course):
    """JupyterLab serving the course folder (nbgrader reads nbgrader_config.py from there); stopped after."""
    course, _ = graded_course
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    with running_lab(course, tmp_path, env={"PATH": path}) as server:
        yield server


def wait_for(driver, what: str, condition, timeout: float = PAGE_TIMEOUT_S):
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition(driver)
        except StaleElementReferenceException:  # the page redrew what was being read: read it again
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            screenshot(driver, "formgrader-timeout.png")
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def students_table(driver) -> dict[str, str]:
    """The Manage Students page's rows: learner id -> the row's text (inside the formgrader's iframe)."""
    from selenium.webdriver.common.by import By

    rows = {}
    for row in driver.find_elements(By.CSS_SELECTOR, "table tbody tr"):
        cells = [c.text.strip() for c in row.find_elements(By.TAG_NAME, "td")]
        if len(cells) >= 3:
            rows[cells[1]] = " | ".join(cells)
    return rows


def test_the_formgrader_shows_each_learner_and_score(browser, lab, graded_course):
    from selenium.webdriver.common.by import By

    _, totals = graded_course
    most = sum(len(requirements(e)) for e in EXERCISES)
    browser.get(f"{lab['base']}/lab?token={lab['token']}")

    def menu_item(label):
        def find(driver):
            items = driver.find_elements(By.CSS_SELECTOR, ".lm-Menu .lm-Menu-item")
            return next((i for i in items if i.text.split("\n")[0].strip() == label), None)

        return find

    def menubar(driver):
        items = driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")
        return next((e for e in items if e.text.strip() == "Nbgrader"), None)

    wait_for(browser, "JupyterLab's Nbgrader menu", menubar).click()
    wait_for(browser, "'Formgrader' in the Nbgrader menu", menu_item("Formgrader"), 10).click()
    frame = wait_for(
        browser,
        "the formgrader's iframe",
        lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, ".jp-MainAreaWidget iframe")), None),
    )
    browser.switch_to.frame(frame)
    wait_for(
        browser,
        "the formgrader's 'Manage Students' link",
        lambda d: next(iter(d.find_elements(By.LINK_TEXT, "Manage Students")), None),
    ).click()
    rows = wait_for(
        browser,
        f"a table row per learner {sorted(totals)}",
        lambda d: (r := students_table(d)) and set(totals) <= set(r) and r,
    )
    print("formgrader's Manage Students table:\n" + "\n".join(rows.values()))
    for learner, total in totals.items():
        assert f"{total:g} / {most}" in rows[learner], (
            f"{learner}: expected {total:g} / {most} in {rows[learner]!r}"
        )
    browser.switch_to.default_content()
    path = screenshot(browser, "formgrader.png")
    assert path.stat().st_size > 10_000
    errors = [
        line for line in lab["log"].read_text(errors="replace").splitlines() if "Traceback" in line
    ]
    assert not errors, "JupyterLab's console shows a traceback while the formgrader was open"
    print(f"screenshot {path}")
