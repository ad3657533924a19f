#!/bin/sh
# Fails (and prints them) when groff has any warning about the man page $1.
out=$(groff -man -ww -z "$1" 2>&1)
[ -z "$out" ] || { echo "$out"; exit 1; }
echo "$1: renders without warnings"
