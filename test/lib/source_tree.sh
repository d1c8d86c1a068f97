# The source tree's files into a directory (sourced; bash), for
# test/deb/build_deb.sh and test/ompi5/run_trixie.sh:
#
#   copy_source_tree TOP DEST   in a git checkout the files git tracks or
#                               would track (untracked ones not ignored),
#                               else the whole tree but ./build
copy_source_tree() {
    local top=$1 dest=$2
    if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$top" ls-files -z --cached --others --exclude-standard |
            (cd "$top" && tar --null -T - -cf -) | tar -xf - -C "$dest"
    else
        tar -C "$top" --exclude=./build -cf - . | tar -xf - -C "$dest"
    fi
}
