// Package nn holds neural-network modules whose parameters and buffers are
// named by path, like the keys of a PyTorch state_dict ("convs.0.lin.weight",
// "norms.2.running_mean"), and kept in a Store in the order they were created.
//
// A module's constructor takes the Path it lives at and registers its tensors
// there; its Forward takes a train flag where training and evaluation differ.
package nn

import (
	"fmt"
	"strconv"

	"github.com/micrograph/micrograph/torch"
)

// Var is a parameter or buffer of a Store.
type Var struct {
	Name      string
	Tensor    *torch.Tensor
	Trainable bool // a parameter (learned); false for buffers such as running statistics
}

// Store owns the parameters and buffers of a model, on one device and dtype.
type Store struct {
	opts    torch.Options
	compute torch.DType // of the Linear modules' products
	vars    []Var
	index   map[string]int
}

// NewStore makes an empty store whose tensors live on dev with floating-point
// dtype dt (Float32 normally; Float64 for reference checks). Its Linear
// modules compute in dt until SetCompute says otherwise.
func NewStore(dev torch.Device, dt torch.DType) *Store {
	return &Store{opts: torch.Options{DType: dt, Device: dev}, compute: dt, index: map[string]int{}}
}

// SetCompute makes the store's Linear modules multiply in dt (BFloat16 for
// mixed precision): their input, weight and bias are cast to dt for the
// product and the result cast back to the input's dtype, so that the
// parameters, their gradients and everything around the products keep the
// store's dtype.
func (s *Store) SetCompute(dt torch.DType) { s.compute = dt }

// Compute is the dtype the store's Linear modules multiply in.
func (s *Store) Compute() torch.DType { return s.compute }

// Root is the path of the top-level module (no prefix).
func (s *Store) Root() Path { return Path{store: s} }

// Device is where the store's tensors live.
func (s *Store) Device() torch.Device { return s.opts.Device }

// DType is the dtype of floating-point parameters.
func (s *Store) DType() torch.DType { return s.opts.DType }

// Vars lists every parameter and buffer in creation order, the order of a
// PyTorch state_dict.
func (s *Store) Vars() []Var { return s.vars }

// Trainable lists the parameters, in creation order.
func (s *Store) Trainable() []Var {
	var out []Var
	for _, v := range s.vars {
		if v.Trainable {
			out = append(out, v)
		}
	}
	return out
}

// Parameters is the tensors of Trainable.
func (s *Store) Parameters() []*torch.Tensor {
	var out []*torch.Tensor
	for _, v := range s.vars {
		if v.Trainable {
			out = append(out, v.Tensor)
		}
	}
	return out
}

// State is every tensor of the store with its name, for saving.
func (s *Store) State() []torch.Named {
	out := make([]torch.Named, len(s.vars))
	for i, v := range s.vars {
		out[i] = torch.Named{Name: v.Name, Tensor: v.Tensor}
	}
	return out
}

// Save writes every tensor of the store to path (torch.Save), loadable in
// PyTorch as a state_dict.
func (s *Store) Save(path string) error { return torch.Save(path, s.State(), nil) }

// Load copies the tensors of a file written by Save (or by PyTorch's
// torch.save of a matching state_dict) into the store. Keys must match
// exactly; the error lists the missing, unexpected and mis-shaped ones.
func (s *Store) Load(path string) error {
	state, _, err := torch.Load(path, s.opts.Device)
	if err != nil {
		return err
	}
	defer func() {
		for _, n := range state {
			n.Tensor.Free()
		}
	}()
	if err := torch.LoadState(s.State(), state); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Get is the tensor registered under name, or nil.
func (s *Store) Get(name string) *torch.Tensor {
	if i, ok := s.index[name]; ok {
		return s.vars[i].Tensor
	}
	return nil
}

// Free releases every tensor of the store.
func (s *Store) Free() {
	for _, v := range s.vars {
		v.Tensor.Free()
	}
	s.vars, s.index = nil, map[string]int{}
}

func (s *Store) add(name string, t *torch.Tensor, trainable bool) *torch.Tensor {
	if _, dup := s.index[name]; dup {
		panic(fmt.Sprintf("nn: %q registered twice", name))
	}
	t.Unscope()
	if trainable {
		t.SetRequiresGrad(true)
	}
	s.index[name] = len(s.vars)
	s.vars = append(s.vars, Var{Name: name, Tensor: t, Trainable: trainable})
	return t
}

// Path is a place in a Store's tree of modules.
type Path struct {
	store  *Store
	prefix string
}

// Sub is the path of a child module called name.
func (p Path) Sub(name string) Path { return Path{store: p.store, prefix: p.Name(name)} }

// Index is the path of element i of a module list, like PyTorch's ModuleList.
func (p Path) Index(i int) Path { return p.Sub(strconv.Itoa(i)) }

// Name is the full name of an entry called name at this path.
func (p Path) Name(name string) string {
	if p.prefix == "" {
		return name
	}
	return p.prefix + "." + name
}

// Options are the store's dtype and device, for making tensors that belong here.
func (p Path) Options() torch.Options { return p.store.opts }

// Param registers t, which the store now owns, as a trainable parameter.
func (p Path) Param(name string, t *torch.Tensor) *torch.Tensor {
	return p.store.add(p.Name(name), t, true)
}

// Buffer registers t, which the store now owns, as state that is saved but not
// trained.
func (p Path) Buffer(name string, t *torch.Tensor) *torch.Tensor {
	return p.store.add(p.Name(name), t, false)
}
