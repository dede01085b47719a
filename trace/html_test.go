package trace

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/testenv"
)

func renderHTML(t *testing.T, evs []Event) string {
	t.Helper()
	var out bytes.Buffer
	if err := RenderHTML(&out, evs); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// The page is one file a reviewer can mail or archive: nothing to fetch,
// no script, and whatever a command printed is shown as text.
func TestHTMLIsSelfContainedAndEscaped(t *testing.T) {
	evs := recorded(t, auditRun)
	evs[5].Output = `<script>alert(1)</script><img src="https://attacker.example/x.png">`
	page := renderHTML(t, evs)
	if strings.Contains(page, "<script") || strings.Contains(page, "<img") {
		t.Error("a tool's output became markup")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("a tool's output is not shown as text")
	}
	if !strings.Contains(page, `content="default-src 'none'; style-src 'unsafe-inline'"`) {
		t.Error("the page does not forbid loading anything")
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:|//)`).FindString(page); m != "" {
		t.Errorf("the page refers to something outside itself: %s", m)
	}
}

// TestHTMLRendersInABrowser opens the page in headless Chromium: the
// timeline shows each turn and command, the refused write's reason, the
// violation and the promoted files' hashes, and a screenshot shows the
// page drawn with its styles (the violation's red is on it).
func TestHTMLRendersInABrowser(t *testing.T) {
	chromium := testenv.NeedCommand(t, "chromium")
	path := filepath.Join(t.TempDir(), "trace.html")
	if err := os.WriteFile(path, []byte(renderHTML(t, recorded(t, auditRun))), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1200, 900))
	// The deadline covers the browser's whole life: it ends with it.
	tctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actx, cancel := chromedp.NewExecAllocator(tctx, opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	type facts struct {
		Turns       int      `json:"turns"`
		Steps       int      `json:"steps"`
		Failed      int      `json:"failed"`
		Outcome     string   `json:"outcome"`
		Violations  []string `json:"violations"`
		OpenOutput  []string `json:"openOutput"`
		Hashes      []string `json:"hashes"`
		ViolationBG string   `json:"violationBG"`
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible("#outcome")); err != nil {
		t.Fatalf("chromium: open the page: %v", err)
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[facts](`({
		turns: document.querySelectorAll("section.turn").length,
		steps: document.querySelectorAll(".step").length,
		failed: document.querySelectorAll(".step.failed").length,
		outcome: document.querySelector("#outcome").textContent,
		violations: [...document.querySelectorAll(".step .violation")].map(e => e.textContent),
		openOutput: [...document.querySelectorAll(".step details[open] pre.output")].map(e => e.innerText),
		hashes: [...document.querySelectorAll("table.files td.mono")].map(e => e.textContent),
		violationBG: getComputedStyle(document.querySelector(".violation")).backgroundColor,
	})`))
	if err != nil {
		t.Fatalf("chromium: read the page: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"four turns are shown", page.Turns == 4},
		{"four tool calls are shown", page.Steps == 4},
		{"the refused write and the refused connection are marked", page.Failed == 2},
		{"the outcome is shown", page.Outcome == "answered"},
		{"the violation is shown", len(page.Violations) == 1 && strings.Contains(page.Violations[0], "example.com is not in the allow-list")},
		{"why the write failed is open to read", len(page.OpenOutput) == 2 && strings.Contains(page.OpenOutput[0], "cannot create statements/bank.csv: Permission denied")},
		{"each promoted file's hash is shown", len(page.Hashes) == 2 && page.Hashes[0] == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
		{"the page's styles apply", page.ViolationBG == "rgb(253, 236, 238)"},
	} {
		if !c.ok {
			t.Errorf("%s: page %+v", c.name, page)
		}
	}

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 1000 || b.Dy() < 900 {
		t.Errorf("screenshot is %dx%d, want the whole 1200-wide page", b.Dx(), b.Dy())
	}
	// The violation's red (#b00020) as the border and text of the drawn
	// page: present only when the styles were applied and the row drawn.
	red := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 150 && r>>8 < 200 && g>>8 < 30 && bl>>8 < 60 {
				red++
			}
		}
	}
	if red < 200 {
		t.Errorf("the screenshot shows %d pixels of the violation's red, want the marked rows drawn", red)
	}
}
