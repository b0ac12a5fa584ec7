"""corral's own images as the tests run them: under $CORRAL_IMAGE_TAG, which the CLI reads
(tests that start a runtime in-process read it here, as the CLI would)."""

from __future__ import annotations

import os

from orchestrator.config import DEFAULT_BASE_IMAGE, image_name
from orchestrator.home import Environment

# Tests start many gateways: none keeps surfaces started ahead unless its config.toml
# says `warm` (the pools' own tests do; tests/e2e/test_warm_pools.py runs the product's
# default of 1 per kind in use). Subprocesses (gateways, fronts) inherit it.
os.environ.setdefault("CORRAL_WARM_DEFAULT", "0")
ENV = Environment.from_environ(os.environ)
DEFAULT_SANDBOX_IMAGE = image_name("sandbox", ENV.image_tag)
DEFAULT_KIOSK_IMAGE = image_name("kiosk", ENV.image_tag)
DEFAULT_PROXY_IMAGE = image_name("proxy", ENV.image_tag)
DEFAULT_BROWSER_IMAGE = image_name("browser", ENV.image_tag)
DEFAULT_DESKTOP_IMAGE = image_name("desktop", ENV.image_tag)
__all__ = [
    "DEFAULT_BASE_IMAGE",
    "DEFAULT_BROWSER_IMAGE",
    "DEFAULT_DESKTOP_IMAGE",
    "DEFAULT_KIOSK_IMAGE",
    "DEFAULT_PROXY_IMAGE",
    "DEFAULT_SANDBOX_IMAGE",
    "ENV",
]
