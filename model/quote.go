package model

import (
	"strconv"
	"unicode/utf8"
)

// MaxQuotedBytes is how much of a value an error message quotes: input is
// unbounded (a script, a million-character name), messages are not.
const MaxQuotedBytes = 128

// Clip returns s cut to at most n bytes on a rune boundary, with what was
// left out counted ("…(+N bytes)"); s itself when it fits.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(+" + strconv.Itoa(len(s)-cut) + " bytes)"
}

// Quote is strconv.Quote of s clipped to MaxQuotedBytes: how every error
// message should quote what a caller sent.
func Quote(s string) string {
	return strconv.Quote(Clip(s, MaxQuotedBytes))
}
