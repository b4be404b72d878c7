#!/usr/bin/env bash
# release-version.sh VERSION: prepares a release (docs/modules.md). Every
# module of this repository that requires another one requires it at
# VERSION, and go.work maps VERSION of each to its directory, so that the
# workspace builds before the tags are pushed. Then it prints the tags to
# create: the root's VERSION and <dir>/VERSION for each nested module users
# import (the form the go command resolves a module in a subdirectory by).
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
version="${1:-}"
if ! [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "usage: $0 vMAJOR.MINOR.PATCH (got \"$version\")" >&2
	exit 2
fi
mapfile -t mods < <("$GO" list -m -f '{{.Path}} {{.Dir}}')
root_dir="${mods[0]#* }"
replaces=""
for m in "${mods[@]}"; do
	path="${m%% *}" dir="${m#* }"
	for o in "${mods[@]}"; do
		if grep -qE "^[[:space:]]*(require[[:space:]]+)?${o%% *} " "$dir/go.mod"; then
			GOWORK=off "$GO" mod edit -require="${o%% *}@$version" "$dir/go.mod"
		fi
	done
	rel="$(realpath --relative-to="$root_dir" "$dir")"
	[ "$rel" = "." ] && rel=""
	replaces+="	$path $version => ./$rel"$'\n'
done
# Replace the replace block of go.work (the last thing in it).
sed -i '/^replace (/,$d' go.work
printf 'replace (\n%s)\n' "$replaces" >>go.work
"$GO" work edit -fmt
echo "Commit, then tag and push:"
echo "  git tag $version"
for m in "${mods[@]:1}"; do
	rel="$(realpath --relative-to="$root_dir" "${m#* }")"
	case "$rel" in bench | conformance | examples | internal/*) continue ;; esac # nobody imports them
	echo "  git tag $rel/$version"
done
echo "  git push origin --tags"
