#!/usr/bin/env bash
# Install MathJax 3 from the npm registry for offline builds of the book.
#
# The website loads MathJax from a CDN by default, which a machine without internet cannot reach,
# so its formulas would stay raw TeX. This script puts MathJax's browser files (es5) under
# _build/mathjax/static/mathjax/; scripts/book_extension.py then copies them into the site
# (html_static_path) and points Sphinx's mathjax_path at them. Idempotent; needs npm.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${MATHJAX_VERSION:-3.2.2}"
DEST="${1:-_build/mathjax}"
TARGET="$DEST/static/mathjax"
if [ -f "$TARGET/tex-mml-chtml.js" ] && [ "$(cat "$TARGET/VERSION" 2>/dev/null)" = "$VERSION" ]; then
    echo "MathJax $VERSION already in $TARGET"
    exit 0
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
npm install --prefix "$TMP" --no-save --no-audit --no-fund --loglevel=error "mathjax@$VERSION"
rm -rf "$TARGET" && mkdir -p "$TARGET"
ES5="$TMP/node_modules/mathjax/es5"
# The combined component Sphinx loads by default, and what it loads lazily (TeX extensions,
# fonts, the menu, accessibility and speech); the other combined components are left out.
cp -r "$ES5/tex-mml-chtml.js" "$ES5/input" "$ES5/output" "$ES5/ui" "$ES5/a11y" "$ES5/sre" \
      "$ES5/adaptors" "$TARGET/"
cp "$TMP/node_modules/mathjax/LICENSE" "$TARGET/LICENSE"
echo "$VERSION" > "$TARGET/VERSION"
echo "MathJax $VERSION installed in $TARGET ($(du -sh "$TARGET" | cut -f1))"
