#!/usr/bin/env bash
# What `make docs` needs: MkDocs and the Material theme, at the versions the site is built and
# checked with. Installs them with pip only when a different version (or none) is present, and
# leaves everything else alone. To be folded into scripts/install-deps.sh.
set -euo pipefail

PYTHON=${PYTHON:-python3}
MKDOCS_VERSION=1.6.1
MATERIAL_VERSION=9.8.1

installed() {  # distribution name -> its version, or nothing
    "$PYTHON" -c "import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass" "$1"
}

if ! command -v "$PYTHON" >/dev/null; then
    echo "install-docs-deps: $PYTHON not found; install Python 3 (apt-get install python3 python3-pip)" >&2
    exit 1
fi

want=()
[ "$(installed mkdocs)" = "$MKDOCS_VERSION" ] || want+=("mkdocs==$MKDOCS_VERSION")
[ "$(installed mkdocs-material)" = "$MATERIAL_VERSION" ] || want+=("mkdocs-material==$MATERIAL_VERSION")

if [ ${#want[@]} -eq 0 ]; then
    exit 0
fi
echo "install-docs-deps: installing ${want[*]}"
"$PYTHON" -m pip install --quiet --disable-pip-version-check "${want[@]}"
