package report

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/model"
)

// legendRow is one row of the explanation page's legend, as read back from
// the page.
type legendRow struct {
	motif      int
	share      string
	here, file []model.FragmentCount
}

var (
	legendRowRE = regexp.MustCompile(`<tr><td><span class="swatch" style="background: [^"]*"></span>(\d+)</td><td class="share">([^<]*)</td>\n<td>(.*?)</td>(?:<td>(.*?)</td>)?</tr>`)
	fragmentRE  = regexp.MustCompile(`<code>([^<]*)</code> <span class="n">×(\d+)</span>`)
)

// readLegend reads the legend's rows back from a page.
func readLegend(t *testing.T, page string) []legendRow {
	t.Helper()
	fragments := func(cell string) []model.FragmentCount {
		var out []model.FragmentCount
		for _, m := range fragmentRE.FindAllStringSubmatch(cell, -1) {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			out = append(out, model.FragmentCount{SMILES: html.UnescapeString(m[1]), Count: n})
		}
		return out
	}
	var rows []legendRow
	for _, m := range legendRowRE.FindAllStringSubmatch(page, -1) {
		k, _ := strconv.Atoi(m[1])
		rows = append(rows, legendRow{motif: k, share: m[2], here: fragments(m[3]), file: fragments(m[4])})
	}
	return rows
}

// The explanation page's legend has a row per motif with, in their columns,
// its share of the input's atoms, its commonest pieces in the input and
// those the model's description lists for its pre-training data (matched
// by motif). What it draws of the description, which anyone may write, is
// capped as the program's own legends are: model.LegendFragments per motif,
// each SMILES and the data's name quoted to 64 bytes. A description listing
// 200,000 fragments made a page of their size (issue 40: a million, 93 MB).
func TestExplanationPageLegend(t *testing.T) {
	usage := []model.MotifUsage{
		{Motif: 0, Atoms: 30, Fragments: []model.FragmentCount{{SMILES: "c1ccccc1", Count: 4}, {SMILES: "CO", Count: 2}}},
		{Motif: 1, Atoms: 10, Fragments: []model.FragmentCount{{SMILES: "C(=O)O", Count: 5}}},
		{Motif: 2, Atoms: 0},
	}
	huge := make([]model.FragmentCount, 200_000)
	for i := range huge {
		huge[i] = model.FragmentCount{SMILES: strings.Repeat("C", 1+i%40), Count: int64(len(huge) - i)}
	}
	long := strings.Repeat("N", 10_000)
	huge[2].SMILES = long
	legend := []model.MotifUsage{
		{Motif: 0, Atoms: 7, Fragments: huge},
		{Motif: 1, Atoms: 3, Fragments: []model.FragmentCount{{SMILES: "[NH3+]", Count: 9}, {SMILES: "S", Count: 1}}},
		{Motif: 5, Atoms: 1, Fragments: []model.FragmentCount{{SMILES: "P", Count: 1}}}, // not motif 2's: not drawn
	}
	var b bytes.Buffer
	p := ExplanationPage{Model: "m.pt", Objective: "paper", Data: "in.csv", Rows: 3, Usage: usage, Legend: legend,
		LegendData: strings.Repeat("d", 5000)}
	if err := WriteExplanations(&b, p); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if len(page) > 20_000 {
		t.Errorf("the page is %d bytes", len(page))
	}
	wantHuge := []model.FragmentCount{huge[0], huge[1], {SMILES: strings.Repeat("N", 64) + "… (10000 bytes)", Count: huge[2].Count}, huge[3], huge[4]}
	want := []legendRow{
		{0, "75.0%", usage[0].Fragments, wantHuge},
		{1, "25.0%", usage[1].Fragments, legend[1].Fragments},
		{2, "0.0%", nil, nil},
	}
	got := readLegend(t, page)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("legend rows\n%v\nwant\n%v", got, want)
	}
	if !strings.Contains(page, "commonest pieces in "+strings.Repeat("d", 64)+"… (5000 bytes) (pre-training data)") {
		t.Error("the legend's data name is not quoted briefly")
	}
	// Without a legend in the description, no column for it.
	b.Reset()
	p.Legend = nil
	if err := WriteExplanations(&b, p); err != nil {
		t.Fatal(err)
	}
	got = readLegend(t, b.String())
	for i := range want {
		want[i].file = nil
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || strings.Contains(b.String(), "pre-training data") {
		t.Errorf("legend rows without a description's legend\n%v\nwant\n%v", got, want)
	}
}
