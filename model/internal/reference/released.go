package reference

import (
	"math"
	"sort"
)

// ReleasedInput is what the released objective's losses (docs/method.md
// §12.2–§12.4) are computed from, given its subgraphs: node embeddings H
// (N×d), each molecule's atoms, the subgraphs (batch-wide atom indices) with
// each one's molecule, the projection head's weights (W1 d×d with bias b1,
// W2 d×d without bias, rows as PyTorch's Linear stores them) and the motif
// table M (K×d).
type ReleasedInput struct {
	H          [][]float64
	Molecules  [][]int
	Subgraphs  [][]int
	SubGraphOf []int
	W1         [][]float64
	B1         []float64
	W2         [][]float64
	M          [][]float64
}

// ReleasedSettings are §12's numbers the losses use.
type ReleasedSettings struct {
	Tau            float64 // motif and contrast temperature
	SinkhornLambda float64
	SinkhornIters  int
	TopFraction    float64
	MotifWeight    float64
	ContraWeight   float64
	SamplerWeight  float64
}

// ReleasedResult holds the three parts, the total, and the Sinkhorn
// targets (one motif per subgraph).
type ReleasedResult struct {
	Motif, Contra, Sampler, Total float64
	Target                        []int
}

// gelu is x·Φ(x), Φ the standard normal CDF.
func gelu(x float64) float64 { return x * 0.5 * (1 + math.Erf(x/math.Sqrt2)) }

// head is W2·GELU(W1·x + b1) for each row.
func head(in ReleasedInput, rows [][]float64) [][]float64 {
	out := make([][]float64, len(rows))
	for i, x := range rows {
		z := matVec(in.W1, x)
		for k := range z {
			z[k] = gelu(z[k] + in.B1[k])
		}
		out[i] = matVec(in.W2, z)
	}
	return out
}

// Released computes §12's losses directly from their definitions:
//
//	s_j = mean of H over subgraph j;  e_g = mean of H over molecule g
//	z = head(s), y = head(e);  C = cos(z, M)  (J×K)
//	target_j = argmax_k Sinkhorn(C)[k, j]
//	L_motif   = −mean_j log softmax_k(C_j·/τ)[target_j]
//	L_contra  = −mean over molecules with a subgraph of Σ_{own j} log softmax_j(cos(y_g, z)/τ)
//	L_sampler = −mean over selected j of mean_{a,b ∈ j} cos(H_a, H_b), where j is
//	            selected when it is among the ⌈f·J⌉ largest of some column of C
//	            (ties: the lower j first)
func Released(in ReleasedInput, s ReleasedSettings) ReleasedResult {
	sub := meanPool(in.H, in.Subgraphs)
	e := meanPool(in.H, in.Molecules)
	z, y := head(in, sub), head(in, e)
	var r ReleasedResult
	j := len(z)
	if j == 0 {
		return r
	}
	c := cosineLogits(z, in.M, 1) // J×K cosines
	r.Target = ArgmaxColumns(Sinkhorn(c, s.SinkhornLambda, s.SinkhornIters))
	_, logp := softmaxRows(cosineLogits(z, in.M, s.Tau))
	for i, k := range r.Target {
		r.Motif -= logp[i][k]
	}
	r.Motif /= float64(j)

	yz := cosineLogits(y, z, s.Tau)
	own := map[int]float64{}
	for jj, g := range in.SubGraphOf {
		own[g] += yz[g][jj] - logSumExp(yz[g])
	}
	for _, v := range own {
		r.Contra -= v
	}
	r.Contra /= float64(len(own))

	top := int(math.Ceil(s.TopFraction * float64(j)))
	selected := make([]bool, j)
	for k := range in.M {
		order := make([]int, j)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return c[order[a]][k] > c[order[b]][k] })
		for _, i := range order[:top] {
			selected[i] = true
		}
	}
	unit := normalizeRows(in.H)
	var sum float64
	var count int
	for i, members := range in.Subgraphs {
		if !selected[i] {
			continue
		}
		var mean float64
		for _, a := range members {
			for _, b := range members {
				for k := range unit[a] {
					mean += unit[a][k] * unit[b][k]
				}
			}
		}
		sum += mean / float64(len(members)*len(members))
		count++
	}
	r.Sampler = -sum / float64(count)
	r.Total = s.MotifWeight*r.Motif + s.ContraWeight*r.Contra + s.SamplerWeight*r.Sampler
	return r
}
