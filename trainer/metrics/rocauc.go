package metrics

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// ErrNonFiniteScore is ROCAUC's error for a NaN or infinite score: the model
// that gave it diverged.
var ErrNonFiniteScore = errors.New("rocauc: non-finite score")

// ROCAUC is the ROC-AUC of scores against binary labels with OGB's rules
// (docs/method.md §7): per task, molecules whose label is missing (NaN) are left
// out; a task lacking either class is skipped; the result is the mean over
// the remaining tasks. labels and scores are n×tasks, row-major. perTask holds
// each task's value, NaN where skipped. Tied scores count half, as in
// scikit-learn's roc_auc_score. A NaN or infinite score of a labelled
// molecule cannot be ranked: it is an error wrapping ErrNonFiniteScore, as
// scikit-learn refuses such input too.
func ROCAUC(labels, scores []float32, tasks int) (perTask []float64, mean float64, err error) {
	if tasks <= 0 || len(labels) != len(scores) || len(labels)%tasks != 0 {
		return nil, 0, errors.New("rocauc: labels and scores must both be n×tasks")
	}
	n := len(labels) / tasks
	for i, s := range scores {
		if f := float64(s); (math.IsNaN(f) || math.IsInf(f, 0)) && !math.IsNaN(float64(labels[i])) {
			return nil, math.NaN(), fmt.Errorf("%w: %v for molecule %d, task %d", ErrNonFiniteScore, s, i/tasks, i%tasks)
		}
	}
	perTask = make([]float64, tasks)
	type item struct {
		score    float64
		positive bool
	}
	items := make([]item, 0, n)
	var sum float64
	used := 0
	for t := range tasks {
		items = items[:0]
		var pos, neg int
		for i := range n {
			y := labels[i*tasks+t]
			if math.IsNaN(float64(y)) {
				continue
			}
			items = append(items, item{float64(scores[i*tasks+t]), y == 1})
			if y == 1 {
				pos++
			} else {
				neg++
			}
		}
		if pos == 0 || neg == 0 {
			perTask[t] = math.NaN()
			continue
		}
		// Mann–Whitney: AUC = (Σ ranks of positives − P(P+1)/2) / (P·N), with
		// tied scores sharing their average rank.
		sort.Slice(items, func(a, b int) bool { return items[a].score < items[b].score })
		var rankSum float64
		for lo := 0; lo < len(items); {
			hi := lo
			for hi < len(items) && items[hi].score == items[lo].score {
				hi++
			}
			rank := float64(lo+hi+1) / 2 // ranks lo+1 … hi, averaged
			for _, it := range items[lo:hi] {
				if it.positive {
					rankSum += rank
				}
			}
			lo = hi
		}
		p, q := float64(pos), float64(neg)
		perTask[t] = (rankSum - p*(p+1)/2) / (p * q)
		sum += perTask[t]
		used++
	}
	if used == 0 {
		return perTask, math.NaN(), errors.New("rocauc: no task has both classes")
	}
	return perTask, sum / float64(used), nil
}
