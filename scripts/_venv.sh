# shellcheck shell=bash
# Shared set-up for scripts/test and scripts/demo (sourced, not executed).
#
# After sourcing: the shell is in the repository root, .venv exists and holds
# an editable install of secmeta with the kafka, spark and dev extras, and
# REPO_ROOT / VENV_PY are exported. The install step runs only when
# pyproject.toml is newer than .venv/.installed-stamp (or the stamp is missing),
# so repeated runs cost nothing.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT
cd "$REPO_ROOT"

VENV_DIR="$REPO_ROOT/.venv"
VENV_PY="$VENV_DIR/bin/python"
export VENV_PY
STAMP="$VENV_DIR/.installed-stamp"

_die() {
    echo "error: $*" >&2
    exit 1
}

if [ ! -x "$VENV_PY" ]; then
    PYTHON="${PYTHON:-python3}"
    command -v "$PYTHON" >/dev/null 2>&1 \
        || _die "$PYTHON not found; install Python >= 3.11 (or set PYTHON=/path/to/python3.11)"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || _die "$("$PYTHON" -V 2>&1) is too old; secmeta needs Python >= 3.11 (set PYTHON=...)"
    echo "==> creating virtual environment in .venv ($("$PYTHON" -V 2>&1))"
    "$PYTHON" -m venv "$VENV_DIR" || _die "python -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
fi

if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    echo "==> installing secmeta (editable, extras kafka,spark,dev) into .venv"
    "$VENV_PY" -m pip install -qq --disable-pip-version-check -e ".[kafka,spark,dev]" \
        || _die "pip install -e .[kafka,spark,dev] failed (see pip's errors above)"
    touch "$STAMP"
fi

# pyspark needs a Java runtime; warn clearly instead of letting Spark fail obscurely.
JAVA_CMD="java"
if [ -n "${JAVA_HOME:-}" ]; then
    JAVA_CMD="$JAVA_HOME/bin/java"
fi
if ! "$JAVA_CMD" -version >/dev/null 2>&1; then
    echo "warning: '$JAVA_CMD -version' failed: pyspark needs a Java runtime (17 or newer)." >&2
    echo "         Install one (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME;" >&2
    echo "         Spark tests and jobs will fail until then." >&2
fi
