// Package report turns runs into pages a person reads: the motif report
// (BuildMotifReport, written as HTML from templates/), the loss curves of a
// run log and the bars of diagnoses (SVG).
package report
