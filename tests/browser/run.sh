#!/usr/bin/env bash
# CI's real-browser check of the widgets: JupyterLab headless, Debian's chromium driven by Playwright (pip package,
# no browser download). Installs chromium with apt-get when it is missing; a browser that cannot be had fails the run.
# Screenshots: tests/browser/screenshots/ (ignored by git), or $RAGNB_SCREENSHOTS.
set -euo pipefail
cd "$(dirname "$0")/../.."
CHROMIUM="${RAGNB_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "tests/browser: no chromium at $CHROMIUM: installing Debian's chromium with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi
# -n0: one process, as before pyproject turned pytest-xdist on (one JupyterLab and one chromium at a time)
RAGNB_BROWSER=1 RAGNB_CHROMIUM="$CHROMIUM" python -m pytest -q -p no:cacheprovider -n0 tests/browser
echo "tests/browser: screenshots in ${RAGNB_SCREENSHOTS:-tests/browser/screenshots}/"
