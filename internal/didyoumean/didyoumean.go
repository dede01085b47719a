// Package didyoumean suggests the known name nearest to a misspelt one,
// for errors that say "did you mean ...?" (a backend, an agent file's key).
package didyoumean

// Nearest is the name in names closest to s by edit distance, when it is
// close enough to be a likely typo (at most two edits, and fewer than
// half of s's length, so that a short word is not "corrected" into an
// unrelated one); "" otherwise. An exact match is returned as it is.
func Nearest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := Distance(s, n); d < bestD && 2*d < max(len(s), len(n)) {
			best, bestD = n, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, counted in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
