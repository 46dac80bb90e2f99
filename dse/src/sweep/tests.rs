use super::*;

#[test]
fn values_lists_and_ranges_step_the_axis_own_way() {
    assert_eq!(parse_values(Param::Block, "16").unwrap(), [16]);
    assert_eq!(
        parse_values(Param::Block, "32,8,16,8").unwrap(),
        [8, 16, 32]
    );
    assert_eq!(parse_values(Param::Block, "4..32").unwrap(), [4, 8, 16, 32]);
    assert_eq!(
        parse_values(Param::LogWgtBuff, "16..18").unwrap(),
        [16, 17, 18]
    );
    assert_eq!(
        parse_values(Param::Clock, "100..150").unwrap(),
        [100, 110, 120, 130, 140, 150]
    );
    assert_eq!(
        parse_values(Param::Clock, "100..200:50,125").unwrap(),
        [100, 125, 150, 200]
    );
    assert_eq!(
        parse_values(Param::Bus, "64..512").unwrap(),
        [64, 128, 256, 512]
    );
}

#[test]
fn bad_values_name_the_axis_and_the_problem() {
    let e = parse_values(Param::Block, "8..x").unwrap_err();
    assert!(
        e.contains("block '8..x'") && e.contains("'x' is not a whole number"),
        "{e}"
    );
    let e = parse_values(Param::Block, "32..8").unwrap_err();
    assert!(e.contains("starts above its end"), "{e}");
    let e = parse_values(Param::Block, "8..32:8").unwrap_err();
    assert!(
        e.contains("steps by doubling") && e.contains("clock only"),
        "{e}"
    );
    let e = parse_values(Param::Clock, "100..200:0").unwrap_err();
    assert!(e.contains("step of 0"), "{e}");
    let e = parse_values(Param::Batch, "0..4").unwrap_err();
    assert!(e.contains("cannot start at 0"), "{e}");
}

#[test]
fn expansion_covers_every_combination_and_skips_invalid_ones_with_the_reason() {
    let base = HwConfig::default();
    let mut axes = Axes::default();
    axes.set(Param::Batch, vec![1, 2]).unwrap();
    axes.set(Param::Block, vec![8, 16]).unwrap();
    // 3 is not a power of two; LOG_ACC_BUFF_SIZE 18 overflows the ALU instruction at
    // 1x16 (see isa's validation), but not at 1x8.
    axes.set(Param::LogAccBuff, vec![17, 18]).unwrap();
    axes.set(Param::Bus, vec![64, 96]).unwrap();
    let plan = expand(&base, &axes);
    assert_eq!(plan.combinations, 16);
    assert_eq!(plan.configs.len() + plan.skipped.len(), 16);
    // Every bus of 96 bits is refused by the validation, naming the key.
    let bus: Vec<&Skipped> = plan
        .skipped
        .iter()
        .filter(|s| s.values["bus"] == 96)
        .collect();
    assert_eq!(bus.len(), 8);
    assert!(
        bus[0].reason.contains("AXI_DATA_WIDTH = 96"),
        "{}",
        bus[0].reason
    );
    // The valid ones are distinct and carry the swept values.
    let strings: std::collections::BTreeSet<String> = plan
        .configs
        .iter()
        .map(|c| format!("{c} {}", c.axi_data_width))
        .collect();
    assert_eq!(strings.len(), plan.configs.len());
    assert!(plan.configs.iter().all(|c| c.axi_data_width == 64));
    assert!(plan
        .configs
        .iter()
        .any(|c| c.config_string() == "1x16_i8w8a32_15_15_18_17"));
    assert!(plan.configs.iter().all(|c| c.validate().is_ok()));
    let acc18_16: Vec<&Skipped> = plan
        .skipped
        .iter()
        .filter(|s| {
            s.values["bus"] == 64 && s.values["log_acc_buff"] == 18 && s.values["block"] == 16
        })
        .collect();
    assert!(!acc18_16.is_empty());
    assert!(
        acc18_16[0].reason.contains("LOG_ACC_BUFF_SIZE"),
        "{}",
        acc18_16[0].reason
    );
    let summary = skip_summary(&plan.skipped);
    assert_eq!(
        summary.iter().map(|s| s.0).sum::<usize>(),
        plan.skipped.len()
    );
    assert!(summary[0].1.contains("AXI_DATA_WIDTH"), "{summary:?}");
}

#[test]
fn block_and_block_in_cannot_both_be_swept() {
    let mut axes = Axes::default();
    axes.set(Param::BlockIn, vec![8]).unwrap();
    let e = axes.set(Param::Block, vec![8]).unwrap_err();
    assert!(e.contains("block and block_in cannot both be swept"), "{e}");
    axes.set(Param::WgtDepth, vec![512]).unwrap();
    let e = axes.set(Param::LogWgtBuff, vec![17]).unwrap_err();
    assert!(
        e.contains("log_wgt_buff and wgt_depth cannot both be swept"),
        "{e}"
    );
}

#[test]
fn sweep_files_in_json_and_toml_give_the_same_axes() {
    let json = r#"{"base": "small", "block": "4..8", "bus": [64, 128], "clock": 150}"#;
    let toml = "base = \"small\"\nblock = \"4..8\"\nbus = [64, 128]\nclock = 150\n";
    let (a, base_a) = Axes::from_file_text(json, false, "s.json").unwrap();
    let (b, base_b) = Axes::from_file_text(toml, true, "s.toml").unwrap();
    assert_eq!(a, b);
    assert_eq!(base_a.as_deref(), Some("small"));
    assert_eq!(base_b, base_a);
    assert_eq!(expand(&HwConfig::default(), &a).combinations, 4);
    let e = Axes::from_file_text(r#"{"blok": 4}"#, false, "s.json").unwrap_err();
    assert!(e.contains("s.json: unknown axis 'blok'"), "{e}");
    let e = Axes::from_file_text(r#"{"block": true}"#, false, "s.json").unwrap_err();
    assert!(e.contains("block must be a number"), "{e}");
    let e = Axes::from_file_text("block = [", true, "s.toml").unwrap_err();
    assert!(e.contains("s.toml is not valid TOML"), "{e}");
}

#[test]
fn options_override_a_file_axis_by_axis() {
    let (file, _) = Axes::from_file_text(
        r#"{"block_in": [8, 16], "block_out": 8, "bus": 64, "clock": 100}"#,
        false,
        "f",
    )
    .unwrap();
    let mut options = Axes::default();
    options.set(Param::Block, vec![32]).unwrap();
    options.set(Param::Bus, vec![128, 256]).unwrap();
    let merged = file.overridden_by(&options);
    let got: Vec<(Param, Vec<u32>)> = merged.iter().map(|(p, v)| (p, v.to_vec())).collect();
    assert_eq!(
        got,
        [
            (Param::Block, vec![32]),
            (Param::Bus, vec![128, 256]),
            (Param::Clock, vec![100]),
        ]
    );
}

#[test]
fn depths_follow_the_block_and_the_default_sweep_is_valid() {
    let base = HwConfig::default();
    let mut axes = Axes::default();
    axes.set(Param::Block, vec![8, 32]).unwrap();
    axes.set(Param::InpDepth, vec![1024]).unwrap();
    axes.set(Param::WgtDepth, vec![1024]).unwrap();
    axes.set(Param::AccDepth, vec![2048]).unwrap();
    let plan = expand(&base, &axes);
    let [b8, b32] = &plan.configs[..] else {
        panic!("{:?}", plan.skipped)
    };
    // 1024 WGT tiles: 64 KiB of 8x8 tiles, 1 MiB of 32x32 ones.
    assert_eq!((b8.log_wgt_buff_size, b32.log_wgt_buff_size), (16, 20));
    assert_eq!(
        (b8.depth(MemType::Wgt), b32.depth(MemType::Wgt)),
        (1024, 1024)
    );
    assert_eq!(b8.depth(MemType::Acc), 2048);
    assert_eq!(Param::WgtDepth.get(b32), 1024);
    let default = expand(&base, &Axes::default_sweep());
    assert_eq!(default.configs.len(), 12, "{:?}", default.skipped);
}

#[test]
fn shards_split_a_sweep_into_disjoint_parts_that_cover_it() {
    let mut axes = Axes::default();
    axes.set(Param::Block, vec![8, 16, 32]).unwrap();
    axes.set(Param::Bus, vec![64, 96, 128]).unwrap();
    let plan = expand(&HwConfig::default(), &axes);
    let parts: Vec<Plan> = (0..4)
        .map(|i| plan.shard(Shard { index: i, count: 4 }))
        .collect();
    let mut all: Vec<String> = parts
        .iter()
        .flat_map(|p| p.configs.iter().map(HwConfig::config_string))
        .collect();
    all.sort();
    let mut want: Vec<String> = plan.configs.iter().map(HwConfig::config_string).collect();
    want.sort();
    assert_eq!(all, want);
    assert_eq!(parts[0].skipped.len(), plan.skipped.len());
    assert!(parts[1..].iter().all(|p| p.skipped.is_empty()));
    assert_eq!(Shard::parse("1/4"), Ok(Shard { index: 1, count: 4 }));
    assert!(Shard::parse("4/4").unwrap_err().contains("below the count"));
    assert!(Shard::parse("1-4").unwrap_err().contains("INDEX/COUNT"));
}
