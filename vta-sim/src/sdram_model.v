// {module}: a behavioural SDR SDRAM chip for simulation (see vta_sim::sdram_model).
module {module} (
    input  wire clk,
    input  wire rst,
    input  wire sdram_cke,
    input  wire sdram_cs_n,
    input  wire sdram_ras_n,
    input  wire sdram_cas_n,
    input  wire sdram_we_n,
    input  wire sdram_dq_oe,
    input  wire [{bb}:0] sdram_ba,
    input  wire [{ab}:0] sdram_a,
    input  wire [{mh}:0] sdram_dm,
    input  wire [{dh}:0] sdram_dq_o,
    output wire [{dh}:0] sdram_dq_i,
    output reg  fault,
    output reg  [7:0] fault_code
);
    localparam T_RCD = {t_rcd};
    localparam T_RP = {t_rp};
    localparam T_RAS = {t_ras};
    localparam T_WR = {t_wr};
    localparam T_RFC = {t_rfc};
    localparam T_MRD = 2;
    localparam T_REFI_MAX = {t_refi_max};
    localparam NB = {nb};

    reg [{dh}:0] mem [0:{words_minus_one}];
    reg [{nb_h}:0] open_bank;
    reg [{rh}:0] open_row [0:{nb_h}];
    reg [31:0] since_act [0:{nb_h}];
    reg [31:0] since_pre [0:{nb_h}];
    reg [31:0] since_write [0:{nb_h}];
    reg [31:0] since_ref;
    reg [31:0] since_mrs;
    reg [31:0] refresh_gap;
    reg mode_set;
    reg [2:0] cas_latency;
    // Counters of cycles since an event read 1 at the first edge after it. The read
    // pipeline: stage 0 drives DQ.
    reg [3:0] rd_valid;
    reg [{dh}:0] rd_data [0:3];

    assign sdram_dq_i = rd_valid[0] ? rd_data[0] : {{{dw_repeat}{{1'b0}}}};

    wire cmd = sdram_cke && !sdram_cs_n && !(sdram_ras_n && sdram_cas_n && sdram_we_n);
    wire is_act = cmd && !sdram_ras_n && sdram_cas_n && sdram_we_n;
    wire is_read = cmd && sdram_ras_n && !sdram_cas_n && sdram_we_n;
    wire is_write = cmd && sdram_ras_n && !sdram_cas_n && !sdram_we_n;
    wire is_pre = cmd && !sdram_ras_n && sdram_cas_n && !sdram_we_n;
    wire is_ref = cmd && !sdram_ras_n && !sdram_cas_n && sdram_we_n;
    wire is_mrs = cmd && !sdram_ras_n && !sdram_cas_n && !sdram_we_n;
    wire is_bst = cmd && sdram_ras_n && sdram_cas_n && !sdram_we_n;
    wire [{wh}:0] word = {{sdram_ba, open_row[sdram_ba], sdram_a[{ch}:0]}};

    integer b;
    integer lane;
    reg [{dh}:0] merged;

    task flag(input [7:0] code);
        if (!fault) begin
            fault <= 1'b1;
            fault_code <= code;
            $display("sdram_chip_model: fault %0d at bank %0d, address %h (see vta_sim::sdram_model::FAULTS)",
                     code, sdram_ba, sdram_a);
        end
    endtask

    always @(negedge clk) begin
        if (rst) begin
            open_bank <= 0;
            mode_set <= 1'b0;
            cas_latency <= 3'd2;
            rd_valid <= 4'd0;
            fault <= 1'b0;
            fault_code <= 8'd0;
            since_ref <= 32'hffff;
            since_mrs <= 32'hffff;
            refresh_gap <= 32'd0;
            for (b = 0; b < NB; b = b + 1) begin
                since_act[b] <= 32'hffff;
                since_pre[b] <= 32'hffff;
                since_write[b] <= 32'hffff;
            end
        end else begin
            // Time passes.
            for (b = 0; b < NB; b = b + 1) begin
                if (since_act[b] != 32'hffffffff) since_act[b] <= since_act[b] + 1;
                if (since_pre[b] != 32'hffffffff) since_pre[b] <= since_pre[b] + 1;
                if (since_write[b] != 32'hffffffff) since_write[b] <= since_write[b] + 1;
            end
            if (since_ref != 32'hffffffff) since_ref <= since_ref + 1;
            if (since_mrs != 32'hffffffff) since_mrs <= since_mrs + 1;
            if (mode_set) refresh_gap <= refresh_gap + 1;
            if (mode_set && refresh_gap > T_REFI_MAX) flag(8'd15);

            // The read pipeline.
            rd_valid <= {{1'b0, rd_valid[3:1]}};
            rd_data[0] <= rd_data[1];
            rd_data[1] <= rd_data[2];
            rd_data[2] <= rd_data[3];

            if (sdram_dq_oe && rd_valid[0]) flag(8'd8);
            if (!sdram_cke && !sdram_cs_n && !(sdram_ras_n && sdram_cas_n && sdram_we_n))
                flag(8'd1);
            if (cmd && since_ref < T_RFC) flag(8'd13);
            if (cmd && since_mrs < T_MRD) flag(8'd14);

            if (is_act) begin
                if (open_bank[sdram_ba]) flag(8'd2);
                if (since_pre[sdram_ba] < T_RP) flag(8'd10);
                open_bank[sdram_ba] <= 1'b1;
                open_row[sdram_ba] <= sdram_a;
                since_act[sdram_ba] <= 32'd1;
            end
            if (is_read || is_write) begin
                if (!open_bank[sdram_ba]) flag(8'd3);
                if (!mode_set) flag(8'd4);
                if (since_act[sdram_ba] < T_RCD) flag(8'd9);
                // A10: auto precharge.
                if (sdram_a[10]) begin
                    open_bank[sdram_ba] <= 1'b0;
                    since_pre[sdram_ba] <= 32'd1;
                end
            end
            if (is_read) begin
                rd_valid[cas_latency - 3'd1] <= 1'b1;
                rd_data[cas_latency - 3'd1] <= mem[word];
            end
            if (is_write) begin
                if (!sdram_dq_oe) flag(8'd7);
                merged = mem[word];
                for (lane = 0; lane < {lanes}; lane = lane + 1)
                    if (!sdram_dm[lane]) merged[lane * 8 +: 8] = sdram_dq_o[lane * 8 +: 8];
                mem[word] <= merged;
                since_write[sdram_ba] <= 32'd1;
            end
            if (is_pre) begin
                for (b = 0; b < NB; b = b + 1)
                    if ((sdram_a[10] || sdram_ba == b) && open_bank[b]) begin
                        if (since_act[b] < T_RAS) flag(8'd11);
                        if (since_write[b] < T_WR) flag(8'd12);
                        open_bank[b] <= 1'b0;
                        since_pre[b] <= 32'd1;
                    end
            end
            if (is_ref) begin
                if (open_bank != 0) flag(8'd5);
                for (b = 0; b < NB; b = b + 1)
                    if (since_pre[b] < T_RP) flag(8'd10);
                since_ref <= 32'd1;
                refresh_gap <= 32'd0;
            end
            if (is_mrs) begin
                if (open_bank != 0) flag(8'd5);
                // A[2:0] burst length (0: 1), A[6:4] CAS latency; A8 and up are ignored.
                if (sdram_a[2:0] != 3'd0 || (sdram_a[6:4] != 3'd2 && sdram_a[6:4] != 3'd3))
                    flag(8'd6);
                cas_latency <= sdram_a[6:4];
                mode_set <= 1'b1;
                since_mrs <= 32'd1;
            end
            if (is_bst) flag(8'd16);
        end
    end
endmodule
