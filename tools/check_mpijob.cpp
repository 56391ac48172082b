// check_mpijob: checks a Kubeflow MPIJob manifest (tools/deploy/mpijob.yaml) for the mistakes
// that make a braid job start wrong, and prints the launcher's command, one argument per line,
// so a test can run it in dry-run form.
//   check_mpijob MANIFEST.yaml
// Checked: kubeflow.org/v2beta1 MPIJob; one launcher; the launcher runs
// `braid supervise --run RUN -- mpirun ... braid train` with RUN = run.dir/run.name; every worker
// runs `braid supervise --stop-ranks braid -- sshd ...` (so an eviction's SIGTERM becomes a
// clean stop, docs/multinode.md); mpirun's -np = Worker replicas x slotsPerWorker;
// OMP_NUM_THREADS is forwarded and slotsPerWorker x OMP_NUM_THREADS = the worker's cpu limit;
// run.dir lies on a volume that the launcher and every worker mount from the same claim
// (checkpoints must be shared). GPUs: a worker's nvidia.com/gpu limit is whole cards, one per
// rank (= slotsPerWorker), requests (if given) equal to it; `train.device=cuda` needs it; the
// launcher (mpirun only) holds none.
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

int g_errors = 0;

void error(const std::string& key, const std::string& msg) {
  std::fprintf(stderr, "check_mpijob: %s: %s\n", key.c_str(), msg.c_str());
  ++g_errors;
}

// The scalar at `key` under `node`, or an error naming the full key path.
std::optional<std::string> scalar(const YAML::Node& node, const std::string& path,
                                  const char* key) {
  const YAML::Node v = node[key];
  if (!v || !v.IsScalar()) {
    error(path + "." + key, "missing (or not a single value)");
    return std::nullopt;
  }
  return v.as<std::string>();
}

std::optional<long> integer(const YAML::Node& node, const std::string& path, const char* key) {
  auto s = scalar(node, path, key);
  if (!s) return std::nullopt;
  try {
    size_t used = 0;
    long v = std::stol(*s, &used);
    if (used == s->size()) return v;
  } catch (const std::exception&) {
  }
  error(path + "." + key, "'" + *s + "' is not an integer");
  return std::nullopt;
}

// Kubernetes cpu quantities: "16" or "16000m".
std::optional<double> cpu_quantity(const std::string& s) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size()) return v;
    if (used + 1 == s.size() && s.back() == 'm') return v / 1000.0;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Mount path -> claim name of the pod template's volume mounts of its first container.
std::vector<std::pair<std::string, std::string>> claim_mounts(const YAML::Node& pod) {
  std::vector<std::pair<std::string, std::string>> out;
  const YAML::Node container = pod["containers"][0];
  for (const auto& m : container["volumeMounts"]) {
    for (const auto& v : pod["volumes"]) {
      const YAML::Node pvc = v["persistentVolumeClaim"];  // other volumes (emptyDir): none
      if (v["name"].as<std::string>("") == m["name"].as<std::string>("") && pvc &&
          pvc["claimName"])
        out.emplace_back(m["mountPath"].as<std::string>(""), pvc["claimName"].as<std::string>());
    }
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The file name of a path: /usr/local/bin/braid -> braid.
std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// A container's command + args, one argument each.
std::vector<std::string> container_argv(const YAML::Node& pod) {
  std::vector<std::string> argv;
  for (const char* part : {"command", "args"})
    for (const auto& a : pod["containers"][0][part]) argv.push_back(a.as<std::string>());
  return argv;
}

// `braid supervise OPTIONS -- CMD...` split at "--": the options, and CMD... (empty with an
// error naming `where` when argv is not a supervisor's command line).
struct Supervised {
  std::vector<std::string> options, command;
};
Supervised split_supervise(const std::vector<std::string>& argv, const std::string& where,
                           const std::string& example) {
  Supervised out;
  if (argv.size() < 2 || base_name(argv[0]) != "braid" || argv[1] != "supervise") {
    error(where,
          "must start with braid supervise (the pod's PID 1 that turns an eviction's "
          "SIGTERM into a clean stop): " +
              example);
    return out;
  }
  size_t i = 2;
  for (; i < argv.size() && argv[i] != "--"; ++i) out.options.push_back(argv[i]);
  if (i == argv.size()) {
    error(where, "braid supervise has no -- before the command: " + example);
    return out;
  }
  out.command.assign(argv.begin() + static_cast<long>(i) + 1, argv.end());
  if (out.command.empty()) error(where, "braid supervise has no command after --: " + example);
  return out;
}

// The value after `name` in a supervise option list, or nullopt.
std::optional<std::string> option_value(const std::vector<std::string>& opts,
                                        const std::string& name) {
  for (size_t i = 0; i + 1 < opts.size(); ++i)
    if (opts[i] == name) return opts[i + 1];
  return std::nullopt;
}

bool under(const std::string& path, const std::string& dir) {
  return path == dir || (path.rfind(dir, 0) == 0 && (dir.back() == '/' || path[dir.size()] == '/'));
}

void check(const YAML::Node& doc) {
  if (doc["apiVersion"].as<std::string>("") != "kubeflow.org/v2beta1")
    error("apiVersion", "must be kubeflow.org/v2beta1 (the MPI operator v2 API)");
  if (doc["kind"].as<std::string>("") != "MPIJob") error("kind", "must be MPIJob");
  const YAML::Node spec = doc["spec"];
  auto slots = integer(spec, "spec", "slotsPerWorker");
  const YAML::Node replicas = spec["mpiReplicaSpecs"];
  const YAML::Node launcher = replicas["Launcher"];
  const YAML::Node worker = replicas["Worker"];
  auto n_launcher = integer(launcher, "spec.mpiReplicaSpecs.Launcher", "replicas");
  auto n_worker = integer(worker, "spec.mpiReplicaSpecs.Worker", "replicas");
  if (n_launcher && *n_launcher != 1)
    error("spec.mpiReplicaSpecs.Launcher.replicas", "must be 1 (one mpirun per job)");
  const YAML::Node lpod = launcher["template"]["spec"];
  const YAML::Node wpod = worker["template"]["spec"];

  const std::vector<std::string> full = container_argv(lpod);
  const std::string where = "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].command";
  const Supervised sup =
      split_supervise(full, where, "braid supervise --run RUN_DIR -- mpirun ... braid train ...");
  const std::vector<std::string>& argv = sup.command;
  if (!sup.command.empty() && argv[0] != "mpirun")
    error(where, "braid supervise must run mpirun (after --), not '" + argv[0] + "'");
  if (option_value(sup.options, "--stop-ranks"))
    error(where,
          "the launcher's braid supervise takes no --stop-ranks (that is the workers' "
          "mode; the launcher's sends SIGUSR1 to mpirun)");
  std::optional<long> np;
  std::optional<double> threads;
  std::string run_dir, run_name, braid_program;
  bool train = false, gpu_run = false;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    const std::string& a = argv[i];
    const std::string& next = argv[i + 1];
    if (a == "-np" || a == "-n") np = std::stol(next);
    if (a == "-x" && next.rfind("OMP_NUM_THREADS=", 0) == 0) threads = std::stod(next.substr(16));
    if (ends_with(a, "braid") && next == "train") train = true, braid_program = base_name(a);
    if (a == "--set" && next.rfind("run.dir=", 0) == 0) run_dir = next.substr(8);
    if (a == "--set" && next.rfind("run.name=", 0) == 0) run_name = next.substr(9);
    if (a == "--set" && next == "train.device=cuda") gpu_run = true;
  }
  if (!sup.command.empty() && !train)
    error(where, "has no 'braid train' (the program mpirun starts)");
  // Without --run a run stopped by an eviction exits 0, and the job counts as done.
  const auto run = option_value(sup.options, "--run");
  if (!sup.command.empty() && !run)
    error(where,
          "braid supervise has no --run RUN_DIR (run.dir/run.name): a run stopped by an "
          "eviction would exit 0 and never be retried");
  if (run && !run_dir.empty() && run_name.empty())
    error(where,
          "has no --set run.name=...: braid supervise --run must name the run directory "
          "run.dir/run.name");
  if (run && !run_dir.empty() && !run_name.empty() && *run != run_dir + "/" + run_name)
    error(where,
          "braid supervise --run " + *run + " but run.dir/run.name is " + run_dir + "/" + run_name);
  if (!np) error(where, "has no -np (ranks = Worker replicas x slotsPerWorker)");
  if (np && slots && n_worker && *np != *slots * *n_worker)
    error(where, "-np " + std::to_string(*np) + " but Worker replicas x slotsPerWorker = " +
                     std::to_string(*n_worker) + " x " + std::to_string(*slots));
  if (!threads) error(where, "does not forward OMP_NUM_THREADS=N with -x");

  const std::string wcpu_key =
      "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].resources.limits.cpu";
  const YAML::Node wcpu = wpod["containers"][0]["resources"]["limits"]["cpu"];
  auto cpu = wcpu ? cpu_quantity(wcpu.as<std::string>()) : std::nullopt;
  if (!cpu)
    error(wcpu_key, "missing or not a cpu quantity");
  else if (threads && slots && *cpu != *threads * static_cast<double>(*slots))
    error(wcpu_key, wcpu.as<std::string>() +
                        " but slotsPerWorker x OMP_NUM_THREADS = " + std::to_string(*slots) +
                        " x " + std::to_string(static_cast<int>(*threads)));

  // GPUs: whole cards, one per rank; none for the launcher.
  const std::string wgpu_key =
      "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].resources.limits.nvidia.com/gpu";
  const YAML::Node wres = wpod["containers"][0]["resources"];
  const YAML::Node wgpu = wres["limits"]["nvidia.com/gpu"];
  if (wgpu) {
    long gpus = -1;
    try {
      size_t used = 0;
      gpus = std::stol(wgpu.as<std::string>(), &used);
      if (used != wgpu.as<std::string>().size()) gpus = -1;
    } catch (const std::exception&) {
    }
    if (gpus < 1)
      error(wgpu_key, "'" + wgpu.as<std::string>() + "' is not a whole number of GPUs");
    else if (slots && gpus != *slots)
      error(wgpu_key, std::to_string(gpus) + " but slotsPerWorker is " + std::to_string(*slots) +
                          ": braid runs one rank per GPU");
    const YAML::Node req = wres["requests"]["nvidia.com/gpu"];
    if (req && req.as<std::string>() != wgpu.as<std::string>())
      error("spec.mpiReplicaSpecs.Worker.template.spec.containers[0].resources.requests."
            "nvidia.com/gpu",
            req.as<std::string>() + " differs from the limit " + wgpu.as<std::string>() +
                " (Kubernetes needs GPU requests equal to limits)");
  }
  if (gpu_run && !wgpu)
    error(wgpu_key, "missing, but the job trains with train.device=cuda (one GPU per rank)");
  if (lpod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    error("spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].resources.limits."
          "nvidia.com/gpu",
          "the launcher runs mpirun only and needs no GPU");

  if (run_dir.empty()) {
    error(where, "has no --set run.dir=... (the run directory must be on the shared volume)");
  } else {
    std::string claim;
    for (const auto& [path, c] : claim_mounts(lpod))
      if (under(run_dir, path)) claim = c;
    if (claim.empty())
      error(where, "run.dir=" + run_dir + " is not on a persistentVolumeClaim the launcher mounts");
    bool shared = false;
    for (const auto& [path, c] : claim_mounts(wpod))
      if (c == claim && under(run_dir, path)) shared = true;
    if (!claim.empty() && !shared)
      error("spec.mpiReplicaSpecs.Worker.template.spec",
            "workers do not mount claim '" + claim + "' at run.dir=" + run_dir);
  }
  // Each worker's entrypoint: the supervisor stopping this job's ranks, then sshd.
  const std::string wwhere = "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command";
  const Supervised wsup = split_supervise(container_argv(wpod), wwhere,
                                          "braid supervise --stop-ranks braid -- sshd -De ...");
  if (!wsup.command.empty() && !ends_with(wsup.command[0], "sshd"))
    error(wwhere, "braid supervise must run sshd (after --), not '" + wsup.command[0] + "'");
  const auto stop = option_value(wsup.options, "--stop-ranks");
  if (!wsup.command.empty() && !stop)
    error(wwhere,
          "braid supervise has no --stop-ranks NAME: an eviction's SIGTERM would reach "
          "sshd only, and the ranks would be killed without a checkpoint");
  if (stop && !braid_program.empty() && *stop != braid_program)
    error(wwhere, "--stop-ranks " + *stop + " but the ranks run '" + braid_program +
                      "' (the name /proc/PID/comm shows)");
  if (g_errors == 0)
    for (const auto& a : full) std::printf("%s\n", a.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_mpijob MANIFEST.yaml\n");
    return 2;
  }
  try {
    check(YAML::LoadFile(argv[1]));
  } catch (const std::exception& e) {  // YAML syntax, a missing section, a non-number
    std::fprintf(stderr, "check_mpijob: %s: %s\n", argv[1], e.what());
    return 1;
  }
  if (g_errors) std::fprintf(stderr, "check_mpijob: %s: %d problem(s)\n", argv[1], g_errors);
  return g_errors ? 1 : 0;
}
