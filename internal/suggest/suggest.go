// Package suggest finds, for a word that is none of the ones expected,
// the nearest of them: errors that teach answer a typo with the word
// meant.
package suggest

import (
	"fmt"
	"strings"
)

// DidYouMean is ` (did you mean "x"?)` for the choice nearest to word,
// when one is near enough to be a typo (an edit for every three
// letters, at least two), else "".
func DidYouMean(word string, choices []string) string {
	best, bestDist := "", -1
	for _, c := range choices {
		if d := editDistance(strings.ToLower(word), strings.ToLower(c)); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist < 0 || bestDist > max(2, len(word)/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b, by bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
