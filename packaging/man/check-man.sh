#!/bin/sh
# Fails (and prints them) when groff has any warning about the man page $1: as typeset, and as
# man-db sets it on an 80-column terminal (MANWIDTH=80 gives a 78-character line), where a long
# unbreakable word "cannot adjust line" (what the package test's `man --warnings` reports).
out=$(groff -man -ww -z "$1" 2>&1; groff -man -ww -z -Tutf8 -rLL=78n "$1" 2>&1)
[ -z "$out" ] || { echo "$out"; exit 1; }
echo "$1: renders without warnings"
