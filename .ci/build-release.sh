#!/usr/bin/env bash
# The one release build command. The Dockerfile's build stage runs this same script, so what
# .ci/run proves is what the image builds. Prints the path of the built binary.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product tollgate --static-swift-stdlib >&2
echo "$(swift build -c release --static-swift-stdlib --show-bin-path)/tollgate"
