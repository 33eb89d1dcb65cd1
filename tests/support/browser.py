"""Headless Chromium through selenium, for the checks that a page renders (the report, the
tracker's experiment page). Without the browser a test is skipped, saying how to add it, and
failed where AUTOML_REQUIRE_BROWSER is set (CI)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


@contextlib.contextmanager
def headless_chrome(height: int = 2400) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver_path):
        missing = "apt-get install chromium chromium-driver (as .ci/run does)"
        if os.environ.get("AUTOML_REQUIRE_BROWSER"):  # CI: a missing browser fails, never skips
            pytest.fail(missing)
        pytest.skip(f"no headless browser here: {missing}")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size=1200,{height}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def assert_not_blank(png: bytes) -> None:
    """A screenshot with a page on it: wide, and more than a handful of colours."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert image.size[0] >= 1000 and len(colours) > 50, "the page rendered blank"
