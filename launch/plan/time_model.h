// Step time, throughput and cost of one training configuration on one cluster.
#pragma once

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

// Fraction of link bandwidth a ring collective reaches (NCCL bus bandwidth vs link rate).
inline constexpr double kCollectiveEfficiency = 0.8;
// Fixed cost per ring hop of a collective and per point-to-point message between GPUs.
inline constexpr double kLinkLatencyS = 10e-6;

// Bubble fraction of a pipeline step relative to its useful time: (p-1)/(v*m)
// (Narayanan et al. 2021). GPipe and 1F1B share it; interleaving divides it by v.
double bubble_fraction(int p, int m, int v);

// Seconds of a ring all-reduce of `bytes` over n ranks at `bw_gbs` GB/s per direction, of
// which a collective reaches `efficiency`, plus `hop_latency_s` per ring hop.
double ring_allreduce_s(double bytes, int n, double bw_gbs,
                        double efficiency = kCollectiveEfficiency,
                        double hop_latency_s = kLinkLatencyS);

// Seconds of a ring reduce-scatter or all-gather of `bytes` (the whole buffer) over n ranks.
double ring_gather_s(double bytes, int n, double bw_gbs, double efficiency = kCollectiveEfficiency,
                     double hop_latency_s = kLinkLatencyS);
// Bandwidths the TP, CP, PP and DP groups see (ranks ordered tp fastest, then cp, pp, dp).
double tp_bandwidth(const Cluster& c, const Layout& l);
double cp_bandwidth(const Cluster& c, const Layout& l);
double pp_bandwidth(const Cluster& c, const Layout& l);
double dp_bandwidth(const Cluster& c, const Layout& l);

// The full prediction: memory, FLOPs, step time split, throughput, cost. Throws UserError on
// an inconsistent layout (dp*tp*pp != GPUs, tp not dividing heads, ...).
PlanResult predict(const ModelConfig& m, const TrainOptions& t, const Layout& l, const Cluster& c);

// Throws UserError when the layout cannot run this model on this cluster.
void check_layout(const ModelConfig& m, const TrainOptions& t, const Layout& l, const Cluster& c);

}  // namespace braid::plan
