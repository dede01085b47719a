package artifact

import (
	"fmt"
	"os"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// maxSchemaProblems caps the schema problems reported per file.
const maxSchemaProblems = 10

var printer = message.NewPrinter(language.English)

// validateSchema validates the JSON file against sch and returns one
// message per failing leaf, each with its JSON pointer; nil when valid.
func validateSchema(sch *jsonschema.Schema, file string) []string {
	f, err := os.Open(file)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	v, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return []string{"not valid JSON: " + err.Error()}
	}
	err = sch.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []string{err.Error()}
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(out) > maxSchemaProblems {
		out = append(out[:maxSchemaProblems], fmt.Sprintf("… and %d more", len(out)-maxSchemaProblems))
	}
	return out
}

// pointer writes a JSON pointer (RFC 6901), quoted; the document itself
// is "".
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return fmt.Sprintf("%q", b.String())
}
