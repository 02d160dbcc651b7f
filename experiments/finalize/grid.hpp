#pragma once
// The axes of the finalize experiments (docs/design/experiments.md#finalize-sweep) and the names
// the check, the sweep and the peers script share: variants with their Options, weight types,
// shapes, row keys.

#include "core/cli.hpp"
#include "experiments/harness/bench_state.hpp"
#include "kernels/finalize/finalize.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::fin {

/// A finalize variant (a registry entry, core/ops/finalize_variants.hpp) and the Options that
/// launch it, under the name it has in result files.
struct NamedVariant {
  std::string name;
  finalize::FinalizeVariant const* entry = nullptr;
  finalize::Options options; // options.variant == entry
};

/// The registry's default lists: what the sweep times (kListSweep) and the check verifies
/// (kListCheck), in list order.
std::vector<std::string> sweep_variant_names();
std::vector<std::string> check_variant_names();
/// Options that launch the variant `name` (a registry entry, or a small_batch_v2 geometry
/// candidate small_batch_v2/c<chunks>/l<loads>[/exit]); InputError naming `flag` for an unknown
/// one.
finalize::Options variant_options(std::string const& name, std::string const& flag = "--variants");
/// "a,b" -> variants (duplicates dropped), each a registered one; with `bf16_only` variants with
/// an E4M3 output (fp8_output) are refused.
std::vector<NamedVariant> parse_variants(std::string const& flag, std::string const& text,
                                         bool bf16_only = false);
/// `variants` with the baseline of each (FinalizeVariant::baseline) in front where it is
/// missing, baselines first: what a timing needs to compute every ratio in the same rounds.
std::vector<NamedVariant> with_baselines(std::vector<NamedVariant> variants);
/// Index in `variants` of the baseline of variants[i] (i itself for a baseline); -1 if absent.
int baseline_index(std::vector<NamedVariant> const& variants, std::size_t i);
/// "a,b,c".
std::string join(std::vector<std::string> const& names);

/// The seed's grid.
std::vector<std::int64_t> const& grid_hidden(); // 1024 ... 7168
std::vector<std::int64_t> const& grid_top_k();  // 1, 2, 4, 6, 8, 10, 16, 22, 32

/// ceil(H / 256) * T < budget: the small-batch regime of the seed's rule.
bool in_regime(std::int64_t hidden, std::int64_t tokens,
               int budget = finalize::kPublishedCtaBudget);
/// {1, 2, 4, ..., 256} inside the regime, plus the regime's last token count.
std::vector<std::int64_t> regime_tokens(std::int64_t hidden,
                                        int budget = finalize::kPublishedCtaBudget);

std::vector<finalize::WeightType> parse_weights(std::string const& flag, std::string const& text);

/// Splits "a,b,c" (no empty items; InputError naming the flag otherwise).
std::vector<std::string> split_names(std::string const& flag, std::string const& text);
/// Splits and checks every item against `allowed`.
std::vector<std::string> parse_choices(std::string const& flag, std::string const& text,
                                       std::vector<std::string> const& allowed);

struct Shape {
  std::int64_t hidden = 0, tokens = 0, top_k = 0;
  finalize::WeightType weights = finalize::WeightType::kBf16;
};

/// "small_batch_v2/candidates[/exit|/w]" in a variant list -> the names of every small_batch_v2
/// geometry candidate of the shapes' top-K values, with the entry (exit) trigger or the
/// warp-groups lane layout (at entry); those that do
/// not fit a shape's K are left out of it with a note by the check and the sweep.
std::string expand_v2_candidates(std::string const& list, std::vector<Shape> const& shapes);

/// "H=1024,T=1,K=8,w=bf16": the shape part of every row key.
std::string shape_key(Shape const& s);

/// Every (H, T, K, weights) in this order of nesting. `tokens` empty: regime_tokens(H) per H.
std::vector<Shape> make_shapes(std::vector<std::int64_t> const& hidden,
                               std::vector<std::int64_t> const& tokens,
                               std::vector<std::int64_t> const& top_k,
                               std::vector<finalize::WeightType> const& weights);

/// Shape-only params (no pointers) for the selection rule: what the dispatcher would pick.
finalize::FinalizeParams shape_params(Shape const& s, std::int64_t hidden_padded = 0);
/// Name of the variant finalize::select picks for the shape with this CTA budget.
std::string dispatch_name(Shape const& s, int budget);

/// Common flags of the check and the sweep: --hidden, --tokens, --top-k, --weights.
struct GridFlags {
  std::string hidden, tokens, top_k, weights;
};
std::vector<Shape> parse_grid(GridFlags const& f);
/// Declares those four options (defaults: the seed's grid) bound to `f`.
void add_grid_options(cli::po::options_description& desc, GridFlags& f);
/// An empty value given on the command line (`--hidden ''`) is an InputError, not the default
/// that an absent flag stands for.
void check_grid_options(cli::po::variables_map const& vm);

/// The grid as axes of a benchmark: hidden sizes, token counts (empty: regime_tokens(H) per H),
/// top-K values and weight types.
struct GridAxes {
  std::vector<std::int64_t> hidden, tokens, top_k;
  std::vector<finalize::WeightType> weights;
};
GridAxes parse_grid_axes(GridFlags const& f);
/// Unit axes H, T (from H when the grid follows the regime), K and weights (key label "w"), in
/// the nesting of make_shapes.
void add_grid_axes(bench::Benchmark& b, GridAxes const& g);
/// The shape of a configuration with those axes.
Shape shape_of(bench::Config const& c);
/// Why `v` cannot run `s` with rows of `hidden_padded` (its declared limits), or "".
std::string unsupported_reason(finalize::FinalizeVariant const& v, Shape const& s,
                               std::int64_t hidden_padded);

} // namespace moefin::fin
