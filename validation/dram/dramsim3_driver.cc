// Replays a request stream on DRAMsim3 (umd-memsys/DRAMsim3, built from a user's checkout by
// nvdla_validation.dram.run_dramsim3) and prints, as one JSON object, when each request was accepted and
// completed. This project's own driver, compiled against DRAMsim3's library; DRAMsim3's files stay outside
// the repository.
//
// Input (argv[2]): one request a line, "CYCLE ADDRESS R|W": CYCLE the memory clock cycle (tCK) at which the
// request is ready, ADDRESS a byte address (hex or decimal); lines in order of CYCLE. Requests are offered
// in order, one a cycle at most, as DRAMsim3's own TraceBasedCPU does: a request the controller cannot take
// yet (its queue full) holds back the ones behind it.
// Output (OUTPUT_DIR/requests.json, beside DRAMsim3's own dramsim3.json statistics): {"tck_ns", "bus_bits", "burst_length", "requests", "reads", "writes", "last_ready",
// "first_accept", "last_done", "cycles", "read_latency_from_ready": [...], "read_latency_from_accept": [...],
// "write_latency_from_ready": [...]} (cycles of the memory clock; a write completes when DRAMsim3 calls
// its write callback).
#include <cstdint>
#include <deque>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "dramsim3.h"

struct Request {
    uint64_t ready;
    uint64_t addr;
    bool write;
};

int main(int argc, char** argv) {
    if (argc != 4) {
        std::cerr << "usage: dramsim3_driver CONFIG.ini REQUESTS.txt OUTPUT_DIR" << std::endl;
        return 2;
    }
    std::ifstream in(argv[2]);
    if (!in) {
        std::cerr << argv[2] << ": cannot read the request stream" << std::endl;
        return 2;
    }
    std::vector<Request> reqs;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::istringstream ls(line);
        std::string cyc, addr, kind;
        ls >> cyc >> addr >> kind;
        reqs.push_back({std::stoull(cyc, nullptr, 0), std::stoull(addr, nullptr, 0), kind == "W"});
    }
    std::unordered_map<uint64_t, std::deque<size_t>> pending_reads, pending_writes;
    std::vector<uint64_t> accepted(reqs.size(), 0), done(reqs.size(), 0);
    uint64_t clk = 0, finished = 0;
    auto on_read = [&](uint64_t addr) {
        auto& q = pending_reads[addr];
        done[q.front()] = clk;
        q.pop_front();
        finished++;
    };
    auto on_write = [&](uint64_t addr) {
        auto& q = pending_writes[addr];
        done[q.front()] = clk;
        q.pop_front();
        finished++;
    };
    dramsim3::MemorySystem* mem = dramsim3::GetMemorySystem(argv[1], argv[3], on_read, on_write);
    size_t next = 0;
    const uint64_t limit = (reqs.empty() ? 0 : reqs.back().ready) + 100000000ULL;
    while (finished < reqs.size() && clk < limit) {
        mem->ClockTick();
        if (next < reqs.size() && reqs[next].ready <= clk &&
            mem->WillAcceptTransaction(reqs[next].addr, reqs[next].write)) {
            mem->AddTransaction(reqs[next].addr, reqs[next].write);
            (reqs[next].write ? pending_writes : pending_reads)[reqs[next].addr].push_back(next);
            accepted[next] = clk;
            next++;
        }
        clk++;
    }
    if (finished < reqs.size()) {
        std::cerr << "stream did not finish within " << limit << " cycles" << std::endl;
        return 1;
    }
    uint64_t last_done = 0, reads = 0;
    for (size_t i = 0; i < reqs.size(); i++) {
        if (done[i] > last_done) last_done = done[i];
        reads += !reqs[i].write;
    }
    mem->PrintStats();
    std::ofstream out(std::string(argv[3]) + "/requests.json");
    out << "{\"tck_ns\": " << mem->GetTCK() << ", \"bus_bits\": " << mem->GetBusBits()
        << ", \"burst_length\": " << mem->GetBurstLength() << ", \"requests\": " << reqs.size()
              << ", \"reads\": " << reads << ", \"writes\": " << reqs.size() - reads
              << ", \"last_ready\": " << (reqs.empty() ? 0 : reqs.back().ready)
              << ", \"first_accept\": " << (reqs.empty() ? 0 : accepted[0]) << ", \"last_done\": " << last_done;
    const char* names[3] = {"read_latency_from_ready", "read_latency_from_accept", "write_latency_from_ready"};
    for (int k = 0; k < 3; k++) {
        out << ", \"" << names[k] << "\": [";
        bool first = true;
        for (size_t i = 0; i < reqs.size(); i++) {
            if (reqs[i].write != (k == 2)) continue;
            uint64_t from = k == 1 ? accepted[i] : reqs[i].ready;
            out << (first ? "" : ", ") << done[i] - from;
            first = false;
        }
        out << "]";
    }
    out << "}" << std::endl;
    delete mem;
    return 0;
}
