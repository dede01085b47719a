package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// allowed is one line of the allow-list: a skip CI accepts, and why.
type allowed struct {
	pkg, test, reason, why string
	line                   int
	testRE, reasonRE       *regexp.Regexp
}

// readAllowList reads the allow-list at p. Each line that is neither
// blank nor a comment (#) is
//
//	package | test | reason | why
//
// package relative to the module ("." for its root), test the full name
// as go test prints it (subtests included, spaces as underscores), reason
// the first line of the skip's message, and why the explanation, which
// must not be empty. In test and reason, "*" stands for any text (a "/"
// included); everything else matches exactly.
func readAllowList(p string) ([]allowed, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read the allow-list: %w", err)
	}
	defer f.Close()
	var list []allowed
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fields := strings.Split(l, "|")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if len(fields) != 4 || slices.Contains(fields, "") {
			return nil, fmt.Errorf("%s:%d: want \"package | test | reason | why\", each not empty: %s", p, n, l)
		}
		list = append(list, allowed{pkg: fields[0], test: fields[1], reason: fields[2], why: fields[3], line: n,
			testRE: wildcard(fields[1]), reasonRE: wildcard(fields[2])})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the allow-list: %w", err)
	}
	return list, nil
}

// wildcard compiles a pattern in which "*" is any text.
func wildcard(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// find returns the entry that allows sk, or nil.
func find(list []allowed, sk skip) *allowed {
	for i := range list {
		if a := &list[i]; a.pkg == sk.pkg && a.testRE.MatchString(sk.test) && a.reasonRE.MatchString(sk.reason) {
			return a
		}
	}
	return nil
}
