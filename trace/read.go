package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Read loads a JSONL trace file. A last line cut short by a crash is
// ignored; any other malformed line is an error naming it.
func Read(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: open %s: %w", path, err)
	}
	defer f.Close()
	evs, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("trace: %s: %w", path, err)
	}
	return evs, nil
}

// Decode reads JSONL trace events from r.
func Decode(r io.Reader) ([]Event, error) {
	var evs []Event
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			complete := b[len(b)-1] == '\n'
			var e Event
			if jerr := json.Unmarshal(b, &e); jerr != nil {
				if !complete && err == io.EOF {
					return evs, nil // a write torn by a crash
				}
				return evs, fmt.Errorf("line %d: %w", line, jerr)
			}
			evs = append(evs, e)
		}
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, fmt.Errorf("line %d: %w", line, err)
		}
	}
}
