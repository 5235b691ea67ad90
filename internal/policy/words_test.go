package policy

import "testing"

// TestWordsAreDistinctAndNonEmpty: the enumerated words are what metrics
// filter on; a duplicate or an empty word would hide a typo.
func TestWordsAreDistinctAndNonEmpty(t *testing.T) {
	seen := map[string]bool{}
	check := func(kind, w string) {
		if w == "" || seen[kind+w] {
			t.Errorf("%s %q is empty or listed twice", kind, w)
		}
		seen[kind+w] = true
	}
	for _, a := range Actions {
		check("action", string(a))
	}
	for _, p := range Phases {
		check("phase", string(p))
	}
	for _, o := range Outcomes {
		check("outcome", string(o))
	}
	if len(Actions) != 9 || len(Outcomes) != 7 || len(Phases) != 13 {
		t.Errorf("%d actions, %d outcomes, %d phases: update the lists when adding a word", len(Actions), len(Outcomes), len(Phases))
	}
}
