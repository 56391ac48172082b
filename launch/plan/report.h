// Rendering plans as a readable table or as JSON for tools.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/model_config.h"
#include "launch/plan/plan_types.h"
#include "launch/plan/search.h"

namespace braid::plan {

nlohmann::json plan_json(const PlanResult& r);
nlohmann::json search_json(const SearchResult& s);
nlohmann::json inference_json(const InferenceResult& r);

std::string plan_text(const ModelConfig& m, const Cluster& c, const PlanResult& r);
std::string search_text(const SearchResult& s);
std::string inference_text(const ModelConfig& m, const Cluster& c, const InferenceResult& r);

}  // namespace braid::plan
