package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// row is one line of a scenario's table. Ratio compares Value with the
// scenario's baseline row (the row whose Baseline is true).
type row struct {
	Case     string  `json:"case"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Ratio    float64 `json:"ratio_to_baseline"`
	Baseline bool    `json:"baseline,omitempty"`
	Note     string  `json:"note,omitempty"`
}

type scenarioResult struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Seconds     float64 `json:"seconds"`
	Rows        []row   `json:"rows"`
}

type report struct {
	Started   time.Time        `json:"started"`
	Machine   string           `json:"machine"`
	Scenarios []scenarioResult `json:"scenarios"`
}

func machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}

func (r report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# oncebox benchmarks\n\n%s, %s\n", r.Started.Format(time.RFC3339), r.Machine)
	for _, s := range r.Scenarios {
		fmt.Fprintf(&b, "\n## %s (%.0fs)\n\n%s\n\n", s.Name, s.Seconds, s.Description)
		b.WriteString("| case | value | unit | ratio | note |\n|---|---:|---|---:|---|\n")
		for _, row := range s.Rows {
			ratio := fmt.Sprintf("%.2f×", row.Ratio)
			if row.Baseline {
				ratio = "1.00× (baseline)"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", row.Case, formatValue(row.Value), row.Unit, ratio, row.Note)
		}
	}
	return b.String()
}

func formatValue(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func (r report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "latest.json"), append(j, '\n'), 0o644)
}

// withRatios fills Ratio of every row against the baseline row.
func withRatios(rows []row) []row {
	var base float64
	for _, r := range rows {
		if r.Baseline {
			base = r.Value
		}
	}
	for i := range rows {
		if base != 0 {
			rows[i].Ratio = rows[i].Value / base
		}
	}
	return rows
}
