// The RDKit side of libmgchem.so: SMILES to OGB graph arrays, Murcko
// scaffolds and depictions, behind the plain C API of mgchem.h.

#include "mgchem.h"

#include <GraphMol/ChemTransforms/ChemTransforms.h>
#include <GraphMol/MolDraw2D/MolDraw2DSVG.h>
#include <GraphMol/MolDraw2D/MolDraw2DUtils.h>
#include <GraphMol/MolOps.h>
#include <GraphMol/RDKitBase.h>
#include <GraphMol/SmilesParse/SmilesParse.h>
#include <GraphMol/SmilesParse/SmilesWrite.h>
#include <RDGeneral/RDLog.h>
#include <RDGeneral/versions.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// RDKit reports SMILES errors only through its global error log. Every thread
// writes into its own buffer, so a call can return the reason for its own
// failure even while other threads parse.
thread_local std::string thread_log;

class ThreadLogBuffer : public std::streambuf {
 protected:
  int overflow(int c) override {
    if (c != traits_type::eof()) thread_log.push_back(static_cast<char>(c));
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char *s, std::streamsize n) override {
    thread_log.append(s, static_cast<size_t>(n));
    return n;
  }
};

ThreadLogBuffer log_buffer;
std::ostream log_stream(&log_buffer);
std::once_flag logs_once;

// Routes RDKit's error log into the per-thread buffer and silences the other
// logs, which would otherwise print warnings such as "not removing hydrogen
// atom without neighbors" on stderr for ordinary molecules.
void init_logs() {
  std::call_once(logs_once, [] {
    rdErrorLog = std::make_shared<boost::logging::rdLogger>(&log_stream);
    for (RDLogger *quiet : {&rdWarningLog, &rdInfoLog, &rdDebugLog}) {
      *quiet = std::make_shared<boost::logging::rdLogger>(&log_stream);
      (*quiet)->df_enabled = false;
    }
  });
}

// The logged lines of this thread without RDKit's "[hh:mm:ss] " stamps,
// joined with "; ".
std::string take_thread_log() {
  std::string out;
  std::istringstream lines(thread_log);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > 11 && line[0] == '[' && line[9] == ']' && line[10] == ' ') line.erase(0, 11);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line.find_first_not_of('*') == std::string::npos) continue;
    if (!out.empty()) out += "; ";
    out += line;
  }
  thread_log.clear();
  return out;
}

char *copy_string(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

// Turns the exception being handled into an error message for the caller.
// Building the message may itself run out of memory: that must not escape
// the C boundary either. Without memory even for a short message the result
// is null, which callers see as a missing output.
mgchem_error current_error() {
  try {
    std::string msg;
    try {
      throw;
    } catch (const std::exception &e) {
      msg = e.what();
    } catch (...) {
      msg = "unknown C++ exception";
    }
    std::string log = take_thread_log();
    if (!log.empty() && log.find(msg) == std::string::npos) msg += " (" + log + ")";
    return copy_string(msg);
  } catch (...) {
    return strdup("out of memory");
  }
}

// Parses like Python's Chem.MolFromSmiles (sanitise, remove hydrogens).
std::unique_ptr<RDKit::RWMol> parse_smiles(const char *smiles, size_t len) {
  init_logs();
  thread_log.clear();
  std::string text(smiles == nullptr ? "" : std::string(smiles, len));
  if (text.empty()) throw std::invalid_argument("empty SMILES");
  RDKit::SmilesParserParams params;
  std::unique_ptr<RDKit::RWMol> mol(RDKit::SmilesToMol(text, params));
  if (!mol) {
    std::string reason = take_thread_log();
    throw std::invalid_argument(reason.empty() ? "SMILES could not be parsed" : reason);
  }
  if (mol->getNumAtoms() == 0) throw std::invalid_argument("SMILES has no atoms");
  return mol;
}

// Index of value among the first n allowed values, else n (OGB's "misc").
uint8_t index_or_misc(long value, long first, long n) {
  long i = value - first;
  return static_cast<uint8_t>(i >= 0 && i < n ? i : n);
}

void atom_features(const RDKit::ROMol &mol, const RDKit::Atom *atom, uint8_t *f) {
  using A = RDKit::Atom;
  f[0] = index_or_misc(atom->getAtomicNum(), 1, 118);
  switch (atom->getChiralTag()) {
    case A::CHI_UNSPECIFIED: f[1] = 0; break;
    case A::CHI_TETRAHEDRAL_CW: f[1] = 1; break;
    case A::CHI_TETRAHEDRAL_CCW: f[1] = 2; break;
    case A::CHI_OTHER: f[1] = 3; break;
    default: f[1] = 4;
  }
  f[2] = index_or_misc(atom->getTotalDegree(), 0, 11);
  f[3] = index_or_misc(atom->getFormalCharge(), -5, 11);
  f[4] = index_or_misc(atom->getTotalNumHs(), 0, 9);
  f[5] = index_or_misc(atom->getNumRadicalElectrons(), 0, 5);
  switch (atom->getHybridization()) {
    case A::SP: f[6] = 0; break;
    case A::SP2: f[6] = 1; break;
    case A::SP3: f[6] = 2; break;
    case A::SP3D: f[6] = 3; break;
    case A::SP3D2: f[6] = 4; break;
    default: f[6] = 5;
  }
  f[7] = atom->getIsAromatic() ? 1 : 0;
  f[8] = mol.getRingInfo()->numAtomRings(atom->getIdx()) > 0 ? 1 : 0;
}

void bond_features(const RDKit::Bond *bond, uint8_t *f) {
  using B = RDKit::Bond;
  switch (bond->getBondType()) {
    case B::SINGLE: f[0] = 0; break;
    case B::DOUBLE: f[0] = 1; break;
    case B::TRIPLE: f[0] = 2; break;
    case B::AROMATIC: f[0] = 3; break;
    default: f[0] = 4;
  }
  // OGB's stereo list has no "misc" entry and a different order from RDKit's enum.
  switch (bond->getStereo()) {
    case B::STEREONONE: f[1] = 0; break;
    case B::STEREOZ: f[1] = 1; break;
    case B::STEREOE: f[1] = 2; break;
    case B::STEREOCIS: f[1] = 3; break;
    case B::STEREOTRANS: f[1] = 4; break;
    case B::STEREOANY: f[1] = 5; break;
    default:
      throw std::invalid_argument("bond " + std::to_string(bond->getIdx()) +
                                  " has a stereo type outside OGB's list");
  }
  f[2] = bond->getIsConjugated() ? 1 : 0;
}

// Python's MurckoScaffold.GetScaffoldForMol followed by MolToSmiles with
// isomeric SMILES, step for step, so that scaffolds (and with them scaffold
// splits) match OGB's.
std::string murcko_scaffold(const RDKit::ROMol &mol) {
  std::unique_ptr<RDKit::ROMol> core(RDKit::MurckoDecompose(mol));
  if (!core) return "";
  core->clearComputedProps();
  core->updatePropertyCache(true);
  RDKit::MolOps::symmetrizeSSSR(*core);
  return RDKit::MolToSmiles(*core, true);
}

struct GraphDeleter {
  void operator()(mgchem_graph *g) const { mgchem_graph_free(g); }
};

}  // namespace

extern "C" {

int mgchem_abi_version(void) { return MGCHEM_ABI_VERSION; }

const char *mgchem_rdkit_version(void) { return RDKit::rdkitVersion; }

void mgchem_free(void *p) { std::free(p); }

void mgchem_graph_free(mgchem_graph *g) {
  if (g == nullptr) return;
  std::free(g->atom_features);
  std::free(g->bond_atoms);
  std::free(g->bond_features);
  std::free(g->scaffold);
  std::free(g);
}

mgchem_error mgchem_mol_graph(const char *smiles, size_t len, int with_scaffold,
                              mgchem_graph **out) {
  try {
    *out = nullptr;
    std::unique_ptr<RDKit::RWMol> mol = parse_smiles(smiles, len);
    std::unique_ptr<mgchem_graph, GraphDeleter> g(
        static_cast<mgchem_graph *>(std::calloc(1, sizeof(mgchem_graph))));
    if (!g) throw std::bad_alloc();
    const unsigned n = mol->getNumAtoms(), m = mol->getNumBonds();
    g->num_atoms = static_cast<int32_t>(n);
    g->num_bonds = static_cast<int32_t>(m);
    // +1: malloc(0) may return NULL, which would read as out of memory.
    g->atom_features = static_cast<uint8_t *>(std::malloc(n * MGCHEM_ATOM_FEATURES + 1));
    g->bond_atoms = static_cast<int32_t *>(std::malloc((m * 2 + 1) * sizeof(int32_t)));
    g->bond_features = static_cast<uint8_t *>(std::malloc(m * MGCHEM_BOND_FEATURES + 1));
    if (!g->atom_features || !g->bond_atoms || !g->bond_features) throw std::bad_alloc();
    for (const RDKit::Atom *atom : mol->atoms()) {
      atom_features(*mol, atom, g->atom_features + atom->getIdx() * MGCHEM_ATOM_FEATURES);
    }
    for (const RDKit::Bond *bond : mol->bonds()) {
      const unsigned i = bond->getIdx();
      g->bond_atoms[2 * i] = static_cast<int32_t>(bond->getBeginAtomIdx());
      g->bond_atoms[2 * i + 1] = static_cast<int32_t>(bond->getEndAtomIdx());
      bond_features(bond, g->bond_features + i * MGCHEM_BOND_FEATURES);
    }
    if (with_scaffold) g->scaffold = copy_string(murcko_scaffold(*mol));
    *out = g.release();
    return nullptr;
  } catch (...) {
    return current_error();
  }
}

mgchem_error mgchem_murcko_scaffold(const char *smiles, size_t len, char **out) {
  try {
    *out = nullptr;
    std::unique_ptr<RDKit::RWMol> mol = parse_smiles(smiles, len);
    *out = copy_string(murcko_scaffold(*mol));
    return nullptr;
  } catch (...) {
    return current_error();
  }
}

mgchem_error mgchem_depict_svg(const char *smiles, size_t len, const int32_t *highlight,
                               const float *colours, int32_t num_highlight, int32_t width,
                               int32_t height, char **out) {
  try {
    *out = nullptr;
    if (width <= 0 || height <= 0) throw std::invalid_argument("image size must be positive");
    std::unique_ptr<RDKit::RWMol> mol = parse_smiles(smiles, len);
    const int n = static_cast<int>(mol->getNumAtoms());
    std::vector<int> colour_of(n, -1);  // index of the atom's entry, -1: not highlighted
    std::vector<int> atoms, bonds;
    std::map<int, RDKit::DrawColour> atom_colours, bond_colours;
    for (int32_t i = 0; i < num_highlight; ++i) {
      const int a = highlight[i];
      if (a < 0 || a >= n) {
        throw std::out_of_range("highlighted atom " + std::to_string(a) + " is not in a molecule of " +
                                std::to_string(n) + " atoms");
      }
      if (colour_of[a] < 0) atoms.push_back(a);
      colour_of[a] = i;
      if (colours != nullptr) {
        atom_colours[a] = RDKit::DrawColour(colours[3 * i], colours[3 * i + 1], colours[3 * i + 2]);
      }
    }
    for (const RDKit::Bond *bond : mol->bonds()) {
      const int a = colour_of[bond->getBeginAtomIdx()], b = colour_of[bond->getEndAtomIdx()];
      if (a < 0 || b < 0) continue;
      if (colours == nullptr) {
        bonds.push_back(static_cast<int>(bond->getIdx()));
      } else if (colours[3 * a] == colours[3 * b] && colours[3 * a + 1] == colours[3 * b + 1] &&
                 colours[3 * a + 2] == colours[3 * b + 2]) {
        bonds.push_back(static_cast<int>(bond->getIdx()));
        bond_colours[static_cast<int>(bond->getIdx())] = atom_colours[static_cast<int>(bond->getBeginAtomIdx())];
      }
    }
    RDKit::MolDraw2DSVG drawer(width, height);
    if (colours == nullptr) {
      RDKit::MolDraw2DUtils::prepareAndDrawMolecule(drawer, *mol, "", &atoms, &bonds);
    } else {
      RDKit::MolDraw2DUtils::prepareAndDrawMolecule(drawer, *mol, "", &atoms, &bonds, &atom_colours,
                                                    &bond_colours);
    }
    drawer.finishDrawing();
    *out = copy_string(drawer.getDrawingText());
    return nullptr;
  } catch (...) {
    return current_error();
  }
}

mgchem_error mgchem_fragment_smiles(const char *smiles, size_t len, const int32_t *atoms,
                                    const int32_t *offsets, int32_t num_fragments, char **out) {
  try {
    *out = nullptr;
    std::unique_ptr<RDKit::RWMol> mol = parse_smiles(smiles, len);
    const int n = static_cast<int>(mol->getNumAtoms());
    std::string all;
    for (int32_t f = 0; f < num_fragments; ++f) {
      std::vector<int> use;
      for (int32_t i = offsets[f]; i < offsets[f + 1]; ++i) {
        if (atoms[i] < 0 || atoms[i] >= n) {
          throw std::out_of_range("atom " + std::to_string(atoms[i]) + " is not in a molecule of " +
                                  std::to_string(n) + " atoms");
        }
        use.push_back(atoms[i]);
      }
      if (use.empty()) throw std::invalid_argument("a fragment needs at least one atom");
      all += RDKit::MolFragmentToSmiles(*mol, use);
      all += '\n';
    }
    *out = copy_string(all);
    return nullptr;
  } catch (...) {
    return current_error();
  }
}

}  // extern "C"
